"""A real daphne serving the dashboard for tests that need the ASGI server
itself (its signals, its access log, several server processes), on its own
port and SQLite database (on a PostgreSQL run, a database of its own there:
tests/testdb.py); a logged-in session made in that database, and a
websocket client for its live socket."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dashboard.console.live.defaults import HANDSHAKE_TIMEOUT_S
from dashboard.run import daphne_args
from tests.helpers import serve_logged
from tests.testdb import subprocess_database

ROOT = Path(__file__).resolve().parents[2]
#: What tests give daphne as DJANGO_SECRET_KEY (production settings need one).
TEST_SECRET_KEY = "test-only-" + "k" * 50


@dataclass
class Daphne:
    """A running daphne: its process, base URL, environment and log file."""

    proc: subprocess.Popen[bytes]
    url: str
    env: dict[str, str]
    log: Path

    def log_text(self) -> str:
        """Everything daphne wrote so far (stdout and stderr)."""
        return self.log.read_text(errors="replace")


def dashboard_env(tmp_path: Path, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a dashboard process on `redis_url` and its own
    SQLite file, or on a PostgreSQL run the database standing for that file."""
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        DJANGO_SECRET_KEY=TEST_SECRET_KEY,
        REDIS_URL=redis_url,
        BULLPEN_DB_PATH=str(tmp_path / "db.sqlite3"),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env if "DATABASE_URL" in extra else subprocess_database(env)


def migrate(env: dict[str, str]) -> None:
    """Create the database the environment names."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def serve_daphne(
    env: dict[str, str],
    log: Path,
    app: str | None = None,
    answers: Callable[[int], bool] | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """daphne on dashboard.run's command line (`app`: another ASGI app, e.g.
    the host project's) with `env`, its output in `log`, on a free port
    (tests/helpers.serve_logged): up once its log says it bound the port
    itself and `answers(port)`. Returns the process and its port."""

    def argv(port: int) -> list[str]:
        args = daphne_args("127.0.0.1", port)
        if app is not None:
            args[-1] = app
        return [sys.executable, *args]

    return serve_logged(argv, log, daphne_listening, answers, cwd=ROOT, env=env)


def daphne_listening(port: int) -> str:
    """What daphne logs once it bound `port` on 127.0.0.1."""
    return f"Listening on TCP address 127.0.0.1:{port}"


@contextmanager
def daphne(
    tmp_path: Path, redis_url: str, log_name: str = "daphne.log", **extra: str
) -> Iterator[Daphne]:
    """Migrate, start daphne and wait until it answers; killed afterwards if
    the test left it running. Several servers share one database when
    `BULLPEN_DB_PATH` is given, each its own `log_name`."""
    env = dashboard_env(tmp_path, redis_url, **extra)
    migrate(env)
    log = tmp_path / log_name

    def login_page(port: int) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/login/", timeout=2
            ) as r:
                return r.status == 200
        except OSError:
            return False

    proc, port = serve_daphne(env, log, answers=login_page)
    try:
        yield Daphne(proc, f"http://127.0.0.1:{port}", env, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


_LOGIN = """
from django.contrib.auth.models import Permission, User
from django.test import Client
user = User.objects.create_user({username!r}, password="x")
user.user_permissions.add(Permission.objects.get(codename="view_queues"))
client = Client()
client.force_login(user)
print(client.cookies["sessionid"].value)
"""


def viewer_session(env: dict[str, str], username: str = "viewer") -> str:
    """The session key of a new user holding the view permission, logged in
    in the database (and with the secret key) of `env`."""
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", _LOGIN.format(username=username)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip().splitlines()[-1]


class LiveSocket:
    """A websocket client of a daphne's `/ws/live/` (autobahn, which daphne
    brings): `messages` gets every message, `batch` frames unpacked."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.protocol: Any = None

    @classmethod
    async def open(
        cls, server_url: str, session_key: str, path: str = "/ws/live/"
    ) -> LiveSocket:
        """Connect with the session's cookie and the server's own Origin (to
        `path`: a host project mounts the socket under its prefix)."""
        from autobahn.asyncio.websocket import (
            WebSocketClientFactory,
            WebSocketClientProtocol,
        )

        sock = cls()
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[None] = loop.create_future()

        class Protocol(WebSocketClientProtocol):  # type: ignore[misc]
            def onOpen(self) -> None:  # noqa: N802 - autobahn's API
                sock.protocol = self
                opened.set_result(None)

            def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802
                frame = json.loads(payload)
                batch = frame["messages"] if frame["type"] == "batch" else [frame]
                for message in batch:
                    sock.messages.put_nowait(message)

            def onClose(self, clean: bool, code: Any, reason: Any) -> None:  # noqa: N802
                if not opened.done():
                    opened.set_exception(ConnectionError(f"refused: {reason}"))

        host, port = server_url.removeprefix("http://").split(":")
        factory = WebSocketClientFactory(
            f"ws://{host}:{port}{path}",
            origin=server_url,
            headers={"Cookie": f"sessionid={session_key}"},
        )
        factory.protocol = Protocol
        # The server decides when a handshake has taken too long (daphne's
        # connect timeout, HANDSHAKE_TIMEOUT_S), as for a browser, which has
        # no opening timeout of its own; autobahn's 5 s would decide first.
        wait_s = HANDSHAKE_TIMEOUT_S + 5
        factory.setProtocolOptions(openHandshakeTimeout=wait_s)
        await loop.create_connection(factory, host, int(port))
        await asyncio.wait_for(opened, wait_s)
        return sock

    def send(self, message: dict[str, Any]) -> None:
        """Send one JSON message to the server."""
        self.protocol.sendMessage(json.dumps(message).encode())

    def close(self) -> None:
        """Close the socket (without waiting)."""
        if self.protocol is not None:
            self.protocol.sendClose()
