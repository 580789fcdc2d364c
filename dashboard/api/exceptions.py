"""Errors of the producer API and webhooks.

ApiError                    (an HTTP error answered as JSON {"error": {code, message}})
 ├── BadRequest             400
 ├── Unauthorized           401
 ├── Forbidden              403
 ├── NotFound               404
 ├── MethodNotAllowed       405
 ├── Conflict               409
 ├── PayloadTooLarge        413
 ├── UnsupportedMediaType   415
 ├── Unprocessable          422
 ├── RateLimited            429
 └── Unavailable            503
WebhookError
 ├── DestinationRefused     (private address, bad scheme, redirect)
 └── InvalidSignature       (verify() of a received webhook)
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Base class: an error answered with `status` and a stable `code`."""

    status = 400

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}
        self.headers = headers or {}


class BadRequest(ApiError):
    """Raised when a request is malformed or a field is invalid."""

    status = 400


class Unauthorized(ApiError):
    """Raised when a request has no valid API token."""

    status = 401


class Forbidden(ApiError):
    """Raised when a token may not act on this queue or lacks the scope."""

    status = 403


class NotFound(ApiError):
    """Raised when a route or a job does not exist."""

    status = 404


class MethodNotAllowed(ApiError):
    """Raised when a route does not accept the request's method."""

    status = 405


class Conflict(ApiError):
    """Raised when a job id is taken or an idempotent request is still running."""

    status = 409


class PayloadTooLarge(ApiError):
    """Raised when a request body is over the size cap."""

    status = 413


class UnsupportedMediaType(ApiError):
    """Raised when a body is not sent as application/json."""

    status = 415


class Unprocessable(ApiError):
    """Raised when job data fails its queue's JSON Schema or a key is reused."""

    status = 422


class RateLimited(ApiError):
    """Raised when a token is over its rate limit."""

    status = 429


class Unavailable(ApiError):
    """Raised when Redis cannot be reached."""

    status = 503


class WebhookError(Exception):
    """Base class of webhook errors."""


class DestinationRefused(WebhookError):
    """Raised when a webhook URL or a redirect points where we must not send."""


class InvalidSignature(WebhookError):
    """Raised when a received webhook's signature or timestamp does not verify."""
