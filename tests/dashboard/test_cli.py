"""`bullpen runserver`'s address argument takes Django's runserver forms
(the whole command is run from the installed wheel in tests/packaging)."""

from __future__ import annotations

import argparse

import pytest

from dashboard.cli import _addrport


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8000", ("", "8000")),
        ("0.0.0.0:8000", ("0.0.0.0", "8000")),
        ("[::1]:9000", ("[::1]", "9000")),
        ("localhost:80", ("localhost", "80")),
    ],
)
def test_addrport_takes_port_or_host_and_port(
    text: str, expected: tuple[str, str]
) -> None:
    """PORT, HOST:PORT and [IPv6]:PORT split into (host, port)."""
    assert _addrport(text) == expected


@pytest.mark.parametrize("text", ["nope", "host:", "host:port", ":"])
def test_addrport_refuses_anything_else(text: str) -> None:
    """Without a numeric port the argument is refused (a usage error)."""
    with pytest.raises(argparse.ArgumentTypeError):
        _addrport(text)
