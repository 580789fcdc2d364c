"""Where webhooks may go: public addresses only, unless settings allow more.

A URL's host is resolved and *every* address it resolves to must be allowed
(an attacker's name may resolve to one public and one internal address); the
sender then connects to one of those checked addresses itself, so a second
DNS answer cannot swap in another (DNS rebinding). Redirects are never
followed; one to a refused address is reported as such.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..exceptions import DestinationRefused

__all__ = ["DestinationRefused", "Policy", "Target", "parse_url", "resolve_allowed"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), else itself:
    `::ffff:127.0.0.1` must be judged as 127.0.0.1."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


@dataclass(frozen=True)
class Policy:
    """Private, loopback and link-local destinations are refused unless
    `allow_private`, or unless inside one of `allowed_networks`."""

    allow_private: bool = False
    allowed_networks: tuple[Network, ...] = ()

    def allows(self, ip: IPAddress) -> bool:
        """Whether a webhook may be sent to this address."""
        ip = embedded_ipv4(ip)
        if any(ip in net for net in self.allowed_networks):
            return True
        if self.allow_private:
            return not (ip.is_multicast or ip.is_unspecified)
        return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class Target:
    """A parsed webhook URL."""

    scheme: str
    host: str
    port: int
    path: str

    @property
    def host_header(self) -> str:
        """The Host header (the port only when it is not the scheme's default)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def parse_url(url: str) -> Target:
    """Split a webhook URL, refusing what is not plain http(s) to a host."""
    if not isinstance(url, str) or len(url) > 2000:
        raise DestinationRefused("the URL must be a string of at most 2000 characters")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise DestinationRefused("the URL holds spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DestinationRefused(f"the URL cannot be parsed ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise DestinationRefused("only http and https URLs are allowed")
    if parts.username is not None or parts.password is not None:
        raise DestinationRefused("credentials in the URL are not allowed")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise DestinationRefused("the URL has no host")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(
        parts.scheme, host, port or (443 if parts.scheme == "https" else 80), path
    )


def literal_address(host: str) -> IPAddress | None:
    """The address a host names without DNS (IPv6, dotted, or the shorthand
    forms inet_aton accepts such as `127.1` or `2130706433`), else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _is_local_name(host: str) -> bool:
    host = host.lower()
    return host == "localhost" or host.endswith(".localhost")


def check_without_dns(target: Target, policy: Policy) -> None:
    """Refuse what can be refused without resolving (at enqueue time)."""
    ip = literal_address(target.host)
    if ip is not None and not policy.allows(ip):
        raise DestinationRefused(f"{target.host} is not a public address")
    if ip is None and _is_local_name(target.host) and not policy.allow_private:
        raise DestinationRefused(f"{target.host} is a local name")


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for host (A and AAAA)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def resolve_allowed(
    target: Target, policy: Policy, resolver: Resolver = system_resolver
) -> list[IPAddress]:
    """The host's addresses, all checked; refused if any one is not allowed."""
    check_without_dns(target, policy)
    ip = literal_address(target.host)
    if ip is not None:
        return [ip]
    try:
        raw = resolver(target.host, target.port)
    except (OSError, UnicodeError) as exc:
        raise OSError(f"cannot resolve {target.host}: {exc}") from None
    addresses: list[IPAddress] = []
    for text in raw:
        try:
            addr = ipaddress.ip_address(text.split("%", 1)[0])
        except ValueError:
            raise DestinationRefused(f"{target.host} resolved to {text!r}") from None
        if not policy.allows(addr):
            raise DestinationRefused(
                f"{target.host} resolves to {addr}, which is not a public address"
            )
        if addr not in addresses:
            addresses.append(addr)
    if not addresses:
        raise OSError(f"{target.host} resolved to no address")
    return addresses
