"""The client's address, the one place any part of the dashboard reads it.

Behind `conf.trusted_proxy_count` proxies (each appending the address it
received the request from to X-Forwarded-For) the client is that many entries
from the header's right end; what stands left of it, a client may have
written itself. With 0 (the default) the header is not read at all: the
address is the connection's (REMOTE_ADDR)."""

from __future__ import annotations

import ipaddress

from django.http import HttpRequest

from . import conf

#: What a request without any address (not from a socket) is counted as.
UNKNOWN = "unknown"


def client_address(request: HttpRequest) -> str:
    """The client's IP address as text, or "unknown"."""
    remote = str(request.META.get("REMOTE_ADDR") or UNKNOWN)
    count = conf.get().trusted_proxy_count
    if count <= 0:
        return remote
    forwarded = [
        entry.strip()
        for entry in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")
    ]
    if len(forwarded) < count:
        # Not through every trusted proxy: only the connection is certain.
        return remote
    try:
        return str(ipaddress.ip_address(forwarded[-count]))
    except ValueError:
        return remote
