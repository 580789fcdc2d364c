"""Collection settings and shared fixtures of tests/queues."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.redis_server import RedisServer

#: Type-checked by test_typing.py, never run (their mistakes are on purpose).
collect_ignore = ["typing"]


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own, which it may restart (or fill with
    what is server-wide, such as function libraries)."""
    server = RedisServer().start()
    yield server
    server.stop()
