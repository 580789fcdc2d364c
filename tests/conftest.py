"""Fixtures shared by every test: a real redis-server started for the session."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Iterator

import pytest
import redis

from queues import Queue
from tests.redis_server import RedisServer


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a CI timeout, `timeout`, a closed job) ends the run as Ctrl-C
    does, so fixtures tear down: the session's redis-server and the helper
    processes tests start in their own sessions are stopped, not orphaned."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the whole run, on a free port, no persistence."""
    server = RedisServer().start()
    os.environ["BULLPEN_TEST_REDIS_URL"] = server.url
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL, its db flushed before the test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A decoding client on the flushed test server."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def qname() -> str:
    """A fresh queue name per test."""
    return f"q{uuid.uuid4().hex[:10]}"


@pytest.fixture
def q(redis_url: str, qname: str) -> Iterator[Queue]:
    """A sync Queue named `qname` on the flushed session server (the API and
    dashboard conftests point Django at the same server)."""
    queue = Queue(qname, redis_url)
    yield queue
    queue.close()
