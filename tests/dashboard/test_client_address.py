"""The client's address, the one helper every part reads it from: the
connection's, or X-Forwarded-For's counted from the right behind
BULLPEN_TRUSTED_PROXY_COUNT proxies."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory

from dashboard.shared.addresses import client_address


def request_from(remote: str, forwarded: str | None = None) -> Any:
    headers = {} if forwarded is None else {"HTTP_X_FORWARDED_FOR": forwarded}
    return RequestFactory().get("/", REMOTE_ADDR=remote, **headers)


@pytest.mark.parametrize(
    ("count", "forwarded", "expected"),
    [
        (0, "198.51.100.7", "10.0.0.254"),
        (1, "198.51.100.7", "198.51.100.7"),
        (1, "6.6.6.6, 198.51.100.7", "198.51.100.7"),
        (2, "6.6.6.6, 198.51.100.7, 10.1.1.1", "198.51.100.7"),
        (1, " 2001:db8::7 ", "2001:db8::7"),
        # Fewer entries than proxies, or one that is no address: the
        # connection's address (never something a client may have written).
        (2, "198.51.100.7", "10.0.0.254"),
        (1, "", "10.0.0.254"),
        (1, "6.6.6.6, not-an-address", "10.0.0.254"),
        (1, None, "10.0.0.254"),
    ],
)
def test_the_client_address(
    settings: Any, count: int, forwarded: str | None, expected: str
) -> None:
    """X-Forwarded-For's entry `count` from the right, else REMOTE_ADDR."""
    settings.BULLPEN_TRUSTED_PROXY_COUNT = count
    assert client_address(request_from("10.0.0.254", forwarded)) == expected


def test_no_address_at_all() -> None:
    """A request without REMOTE_ADDR (not from a socket) is "unknown"."""
    request = RequestFactory().get("/")
    del request.META["REMOTE_ADDR"]
    assert client_address(request) == "unknown"
