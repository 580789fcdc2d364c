"""The pages' Redis client: one per process, with timeouts short enough that
a page over a dead Redis answers "Redis is not answering" in seconds."""

from __future__ import annotations

from functools import cache

import redis
from django.conf import settings

from queues.connection import sync_client

#: What a dead, unreachable or still-loading Redis raises (pages answer 503).
REDIS_DOWN = (redis.ConnectionError, redis.TimeoutError)


def connect(url: str) -> redis.Redis:
    """A client decoding as the queue core does, with the dashboard's timeouts,
    so that a request to an unreachable Redis fails in seconds, not minutes
    (timeouts in the URL's query string win)."""
    return sync_client(
        redis.Redis.from_url(
            url,
            socket_connect_timeout=settings.BULLPEN_REDIS_CONNECT_TIMEOUT_S,
            socket_timeout=settings.BULLPEN_REDIS_TIMEOUT_S,
            decode_responses=True,
            encoding_errors="surrogateescape",
        )
    )


@cache
def client() -> redis.Redis:
    """One client per process for the pages."""
    return connect(settings.REDIS_URL)
