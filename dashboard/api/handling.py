"""What every API request goes through: routing by method, authentication,
rate limit, path checks, scope, and errors answered as JSON (never a 500 page
or a traceback, whatever DEBUG says)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from queues.outages import describe, recoverable, refusal_code, refusal_meaning

from ..shared import conf
from . import ratelimit, store
from .auth import Principal, authenticate
from .exceptions import ApiError, Forbidden, MethodNotAllowed, NotFound, Unavailable
from .grouping import check_group_id
from .operations import Operation
from .validation import check_job_id, check_queue_name

log = logging.getLogger("dashboard.api")


@dataclass
class Call:
    """What a view is handed besides the request and path parameters."""

    op: Operation
    principal: Principal | None


def json_response(
    body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> HttpResponse:
    """A JSON response."""
    response = HttpResponse(
        orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS),
        status=status,
        content_type="application/json",
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def error_response(error: ApiError) -> HttpResponse:
    """The JSON body of an ApiError."""
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.details:
        body["details"] = error.details
    return json_response({"error": body}, error.status, error.headers)


def internal_error() -> HttpResponse:
    """A bug: logged with its traceback here, never shown to the client."""
    return json_response(
        {"error": {"code": "internal_error", "message": "internal error (logged)"}},
        500,
    )


def not_found() -> HttpResponse:
    """No such route."""
    return error_response(NotFound("not_found", "no such API route"))


def _serve(
    request: HttpRequest, op: Operation, kwargs: dict[str, str]
) -> HttpResponseBase:
    principal = None
    allowance = None
    if op.scope is not None:
        principal = authenticate(request, op.tickets)
        allowance = ratelimit.take(
            store.client(),
            store.keys().rate_limit(principal.rate_key),
            principal.rate_per_min,
        )
    if "queue" in kwargs:
        check_queue_name(kwargs["queue"])
    if "job_id" in kwargs:
        check_job_id(kwargs["job_id"])
    if "group" in kwargs:
        check_group_id(kwargs["group"])
    queue = kwargs.get("queue")
    if principal is not None and op.scope is not None:
        if queue is None:
            principal.require_scope(op.scope)
        elif queue == conf.get().webhook_queue:
            raise Forbidden(
                "queue_not_allowed", "the webhook delivery queue is internal"
            )
        else:
            principal.require(op.scope, queue, kwargs.get("job_id"))
    response = op.view(request, Call(op, principal), **kwargs)
    if allowance is not None:
        for name, value in allowance.headers().items():
            response[name] = value
    return response


def route(ops: Sequence[Operation]) -> Callable[..., HttpResponseBase]:
    """One Django view for every operation on a path, chosen by method."""
    by_method = {op.method: op for op in ops}
    allow = ", ".join(sorted(by_method))

    def view(request: HttpRequest, **kwargs: str) -> HttpResponseBase:
        try:
            op = by_method.get(request.method or "")
            if op is None:
                raise MethodNotAllowed(
                    "method_not_allowed",
                    f"{request.method} is not allowed here (allowed: {allow})",
                    headers={"Allow": allow},
                )
            return _serve(request, op, kwargs)
        except ApiError as exc:
            return error_response(exc)
        except Exception as exc:  # noqa: BLE001 - any bug is a JSON 500, logged
            if not recoverable(exc):
                log.exception("API: %s %s failed", request.method, request.path)
                return internal_error()
            # Unreachable, or refusing for a while (maxmemory, a read-only
            # replica): the producer is told so, and to retry.
            log.warning("API: Redis unavailable: %s", describe(exc))
            code = refusal_code(exc)
            message = (
                f"the queue store refused the request and nothing was written: "
                f"{refusal_meaning(code)}; retry later"
                if code
                else "the queue store is unavailable"
            )
            return error_response(Unavailable("redis_unavailable", message))

    view.csrf_exempt = True  # type: ignore[attr-defined]
    return view
