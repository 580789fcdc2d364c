"""The parts of a multi-host Redis URL (`redis+sentinel://`,
`redis+cluster://`): credentials and `host[:port]` items. Errors are
ValueError with only the reason; the caller names the URL."""

from __future__ import annotations

from urllib.parse import unquote


def split_netloc(netloc: str) -> tuple[str | None, str | None, str]:
    """(username, password, hosts) of `[[user]:password@]hosts`."""
    userinfo, at, hosts = netloc.rpartition("@")
    if not at:
        return None, None, netloc
    user, colon, secret = userinfo.partition(":")
    return unquote(user) or None, unquote(secret) if colon else None, hosts


def address(item: str, default_port: int, what: str) -> tuple[str, int]:
    """(host, port) of `host[:port]` or `[v6]:port`; `what` names the item
    in the reason ("sentinel", "node")."""
    if item.startswith("["):  # [::1]:26379
        host, _, port = item[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = item.partition(":")
    if not host:
        raise ValueError(f"{what} {item!r} has no host")
    if not port:
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} {item!r} has a bad port (1 to 65535)")
    return host, int(port)
