"""Plain helpers of the API tests: bounded waits, a webhook receiver, a
queue worker in a thread, the dispatcher in threads, and the test's database
connection kept across requests made outside the test client."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import orjson
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from dashboard.api.webhooks.dispatcher import Dispatcher, DispatcherConfig
from queues import Worker
from tests.helpers import wait_until

T = TypeVar("T")


@dataclass
class Received:
    """One request a Receiver got."""

    at: float
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)


#: (index of the request, the request) -> (status, extra headers)
Behaviour = Callable[[int, Received], tuple[int, dict[str, str]]]


def always_ok(index: int, request: Received) -> tuple[int, dict[str, str]]:
    return 200, {}


@dataclass
class Receiver:
    """An HTTP server on a loopback address that records every request."""

    host: str = "127.0.0.1"
    behaviour: Behaviour = always_ok
    requests: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        owner = self
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if len(body) < length:
                    # The sender died mid-request (a SIGKILLed dispatcher): it
                    # got no answer, so this is no delivery; like a real server,
                    # drop it.
                    self.close_connection = True
                    return
                got = Received(
                    time.monotonic(), self.path, dict(self.headers.items()), body
                )
                with lock:
                    index = len(owner.requests)
                    owner.requests.append(got)
                status, headers = owner.behaviour(index, got)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that timed out and left: expected in some tests

        self.server = Server((self.host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook") -> str:
        return f"http://{self.host}:{self.port}{path}"

    def events(self) -> list[str]:
        """The event of each request received, in order."""
        return [r.json["event"] for r in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class WorkerThread:
    """A queues Worker running in a daemon thread."""

    def __init__(
        self, queue: str, processor: Any, redis_url: str, **options: Any
    ) -> None:
        self.worker = Worker(queue, processor, connection=redis_url, **options)
        self.thread = threading.Thread(target=self.worker.run, daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        wait_until(lambda: self.worker._loop is not None, 5, what="the worker loop")
        self.worker.close()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "worker did not stop"


def fast_config(**overrides: Any) -> DispatcherConfig:
    """The dispatcher configuration of the Django settings in force (Redis URL,
    destination policy: tests set BULLPEN_WEBHOOK_ALLOW_PRIVATE themselves),
    with short waits."""
    values: dict[str, Any] = {
        "consumer": "test-host",
        "timeout_s": 5.0,
        "backoff_ms": 100,
        "attempts": 3,
        "progress_interval_ms": 0,
        "block_ms": 100,
        "refresh_s": 0.05,
        "lock_duration_ms": 2000,
        "concurrency": 4,
    }
    values.update(overrides)
    return DispatcherConfig.from_settings(**values)


@contextmanager
def dispatching(config: DispatcherConfig, **kwargs: Any) -> Iterator[Dispatcher]:
    """The dispatcher in background threads for the duration of the block."""
    dispatcher = Dispatcher(config, **kwargs).start()
    try:
        yield dispatcher
    finally:
        dispatcher.stop()


@contextmanager
def connection_kept() -> Iterator[None]:
    """Meanwhile a request's start and end leave the database connection
    alone, as Django's test client has them around its own requests: a
    response closed by hand (or by a WSGI caller) would otherwise close the
    connection inside the test's transaction, which breaks every later query
    on PostgreSQL (SQLite's in-memory test database ignores the close)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
