"""Sending one webhook: to a checked address only, with a timeout, never
following a redirect (and saying so when the redirect pointed somewhere
refused)."""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urljoin

from .. import defaults
from ..exceptions import DestinationRefused
from . import ssrf

USER_AGENT = "Bullpen-Webhooks/1"


@dataclass(frozen=True)
class Response:
    """What the receiver answered."""

    status: int
    excerpt: str
    location: str | None = None

    @property
    def ok(self) -> bool:
        """A 2xx."""
        return 200 <= self.status < 300


class RedirectRefused(DestinationRefused):
    """Raised when the receiver answers with a redirect (never followed)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects to the checked address, whatever DNS says now."""

    def __init__(self, target: ssrf.Target, ip: str, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._ip = ip

    def connect(self) -> None:
        self.sock = socket.create_connection((self._ip, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """TLS to the checked address, the certificate checked for the host name."""

    def __init__(self, target: ssrf.Target, ip: str, timeout: float) -> None:
        super().__init__(
            target.host,
            target.port,
            timeout=timeout,
            context=ssl.create_default_context(),
        )
        self._ip = ip

    def connect(self) -> None:
        sock = socket.create_connection((self._ip, self.port), self.timeout)
        self.sock = self._context.wrap_socket(  # type: ignore[attr-defined]
            sock, server_hostname=self.host
        )


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    policy: ssrf.Policy,
    timeout_s: float,
    resolver: ssrf.Resolver = ssrf.system_resolver,
) -> Response:
    """POST `body` to `url`; DestinationRefused before any connection when the
    URL (or a redirect it answers with) is not allowed, OSError when it cannot
    be reached."""
    target = ssrf.parse_url(url)
    addresses = ssrf.resolve_allowed(target, policy, resolver)
    cls = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    error: OSError | None = None
    for ip in addresses:
        conn = cls(target, str(ip), timeout_s)
        try:
            conn.request(
                "POST",
                target.path,
                body=body,
                headers={
                    "Host": target.host_header,
                    "Content-Type": "application/json",
                    "User-Agent": USER_AGENT,
                    **headers,
                },
            )
            reply = conn.getresponse()
            excerpt = reply.read(defaults.WEBHOOK_RESPONSE_EXCERPT_BYTES)
            response = Response(
                reply.status,
                excerpt.decode("utf-8", "replace"),
                reply.getheader("Location"),
            )
            break
        except (OSError, http.client.HTTPException) as exc:
            error = exc if isinstance(exc, OSError) else OSError(str(exc))
        finally:
            conn.close()
    else:
        assert error is not None
        raise error
    if 300 <= response.status < 400:
        _refuse_redirect(url, response, policy, resolver)
    return response


def _refuse_redirect(
    url: str, response: Response, policy: ssrf.Policy, resolver: ssrf.Resolver
) -> None:
    location = urljoin(url, response.location or "")
    try:
        target = ssrf.parse_url(location)
        ssrf.resolve_allowed(target, policy, resolver)
    except DestinationRefused as exc:
        raise RedirectRefused(
            f"HTTP {response.status} redirect to {location} refused ({exc}); "
            "redirects are never followed",
            response.status,
        ) from None
    except OSError:
        pass
    raise RedirectRefused(
        f"HTTP {response.status} redirect to {location} not followed "
        "(webhooks never follow redirects; configure the final URL)",
        response.status,
    )
