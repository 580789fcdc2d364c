"""Fixtures of the fault tests: a redis-server of the test's own, which the
test may stop, restart, fill or pause."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.redis_server import RedisServer


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own (no persistence)."""
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def admin(own_redis: RedisServer) -> Iterator[redis.Redis]:
    """A decoding client of `own_redis` for the test's own commands."""
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    yield client
    client.close()
