"""Refusing an API request body over BULLPEN_API_MAX_BODY_BYTES before the
server reads it.

daphne's HTTP server (Twisted) receives a request's whole body, in memory or
a temporary file, before the application sees the request at all, so a size
check in a view or an ASGI middleware comes after the body was taken in.
`install()` makes daphne's request answer 413 from Twisted's own callbacks:
a declared Content-Length over the cap as soon as the headers are in, a
chunked body the moment it passes the cap; then the connection is closed, so
the rest is never read (and no `100 Continue` invites it).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.urls import reverse

from ..shared import conf
from .exceptions import PayloadTooLarge
from .handling import error_response


@cache
def api_path() -> bytes:
    """The path under which the cap applies: `/api/` where the dashboard is
    at the site's root, `/ops/queues/api/` where a host mounts it there."""
    return reverse("bullpen_api:openapi").removesuffix("v1/openapi.json").encode()


def too_large_answer(cap: int) -> bytes:
    """The whole 413 response, the API's JSON error, closing the connection."""
    response = error_response(
        PayloadTooLarge(
            "payload_too_large", f"the body is over {cap} bytes", {"limit_bytes": cap}
        )
    )
    lines = [b"HTTP/1.1 413 Payload Too Large"]
    lines += [f"{k}: {v}".encode("latin-1") for k, v in response.items()]
    lines += [b"Content-Length: %d" % len(response.content), b"Connection: close"]
    return b"\r\n".join(lines) + b"\r\n\r\n" + response.content


def limited(request_class: Any) -> Any:
    """A subclass of daphne's Twisted request that refuses oversized API bodies."""

    class LimitedRequest(request_class):  # type: ignore[misc]
        """daphne's request, with the API body cap applied while reading."""

        _cap: int | None = None
        _received = 0
        _refused = False

        def gotLength(self, length: int | None) -> None:  # noqa: N802 - Twisted's
            if self.channel._path.startswith(api_path()):
                self._cap = conf.get().max_body_bytes
                if length is not None and length > self._cap:
                    self._refuse()
                    return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:  # noqa: N802
            if self._refused:
                return
            self._received += len(data)
            if self._cap is not None and self._received > self._cap:
                self._refuse()
                return
            super().handleContentChunk(data)

        def requestReceived(self, *args: Any) -> None:  # noqa: N802
            if not self._refused:  # the rest of a packet already read
                super().requestReceived(*args)

        def _refuse(self) -> None:
            assert self._cap is not None
            self._refused = True
            # Twisted would answer "Expect: 100-continue" after this method.
            self.requestHeaders.removeHeader(b"expect")
            self.channel.transport.write(too_large_answer(self._cap))
            self.channel.transport.loseConnection()

    return LimitedRequest


def install() -> None:
    """Make daphne (when it serves this process) refuse oversized API bodies
    before reading them; its HTTP factory looks the request class up on each
    new connection."""
    try:
        from daphne import http_protocol
    except ImportError:  # another ASGI server
        return
    if not hasattr(http_protocol.WebRequest, "_refused"):  # not yet installed
        http_protocol.WebRequest = limited(http_protocol.WebRequest)
