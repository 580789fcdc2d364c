"""A real daphne refuses an API request body over BULLPEN_API_MAX_BODY_BYTES
before reading it: the 413 comes back while the client is still sending
(declared Content-Length or chunked), so nothing is spooled. The same where
a host project (tests/hostproject) mounts the API under /ops/queues/."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from queues.devredis import RedisServer
from tests.browser.conftest import (
    HOST_ASGI_APP,
    HOST_PREFIX,
    HOST_SETTINGS,
)
from tests.dashboard.daphne_helpers import serve_daphne
from tests.helpers import stop_process
from tests.testdb import subprocess_database

CAP = 4096
PATH = "/api/v1/queues/q/jobs"


@dataclass(frozen=True)
class Site:
    """A daphne under test: its port, and where it serves the dashboard."""

    port: int
    prefix: str


HUGE = 50_000_000


@pytest.fixture(scope="module", params=["root", "mounted"])
def daphne(redis_server: RedisServer, request: pytest.FixtureRequest) -> Iterator[Site]:
    """daphne serving the dashboard, with a 4 KiB API body cap. "mounted":
    the host project, the API under /ops/queues/api/."""
    mounted = request.param == "mounted"
    with tempfile.TemporaryDirectory(prefix="bullpen-body-") as tmp:
        env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="dashboard.settings",
            REDIS_URL=redis_server.url,
            BULLPEN_DB_PATH=str(Path(tmp) / "db.sqlite3"),
            BULLPEN_API_MAX_BODY_BYTES=str(CAP),
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        )
        subprocess_database(env)
        if mounted:
            env["DJANGO_SETTINGS_MODULE"] = HOST_SETTINGS
            env["HOST_DB_PATH"] = env["BULLPEN_DB_PATH"]
        proc, port = serve_daphne(
            env, Path(tmp) / "daphne.log", HOST_ASGI_APP if mounted else None
        )
        try:
            yield Site(port, HOST_PREFIX if mounted else "")
        finally:
            stop_process(proc, 20)


def _request(site: Site, headers: dict[str, str], first: bytes) -> socket.socket:
    """Open a connection and send the head and the first part of a body."""
    sock = socket.create_connection(("127.0.0.1", site.port), timeout=5)
    head = (
        f"POST {site.prefix}{PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    )
    head += "Content-Type: application/json\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(head.encode() + b"\r\n" + first)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """What the server sent before it closed (or went quiet)."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except TimeoutError:
        pass
    finally:
        sock.close()
    return got


def test_declared_length_over_the_cap_is_refused_before_the_body(
    daphne: Site,
) -> None:
    """Content-Length 50 MB: 413 (the API's JSON error) after the headers,
    though only 1 KB of the body was sent."""
    sock = _request(daphne, {"Content-Length": str(HUGE)}, b"{" + b" " * 1023)
    answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b'"code":"payload_too_large"' in answer
    assert b"Connection: close" in answer


def test_expect_continue_gets_the_413_instead_of_100(daphne: Site) -> None:
    """With Expect: 100-continue the client is told 413, never to go on."""
    headers = {"Content-Length": str(HUGE), "Expect": "100-continue"}
    answer = _answer(_request(daphne, headers, b""))
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"100 Continue" not in answer


def test_chunked_body_is_refused_once_it_passes_the_cap(daphne: Site) -> None:
    """A chunked body is answered 413 as soon as it passes the cap, while the
    client has 50 MB still to send."""
    chunk = b"%x\r\n%s\r\n" % (2048, b" " * 2048)
    sock = _request(daphne, {"Transfer-Encoding": "chunked"}, chunk * 3)
    answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]


def test_a_body_under_the_cap_reaches_the_api(daphne: Site) -> None:
    """A small body is read and handled as before (here: no token, 401)."""
    body = b'{"name": "a"}'
    sock = _request(daphne, {"Content-Length": str(len(body))}, body)
    assert _answer(sock).startswith(b"HTTP/1.1 401 ")


def test_a_large_body_elsewhere_is_not_the_api_s_business(daphne: Site) -> None:
    """The cap is the API's: a page's form post over it is not cut by it."""
    body = b"x" * (CAP * 2)
    sock = socket.create_connection(("127.0.0.1", daphne.port), timeout=5)
    head = (
        f"POST {daphne.prefix}/login/ HTTP/1.1\r\n"
        "Host: 127.0.0.1\r\nConnection: close\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    assert not _answer(sock).startswith(b"HTTP/1.1 413 ")
