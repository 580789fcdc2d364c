"""Redis clients of the API (decoding, as the queue core's) and the keys."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import redis

from dashboard.shared.redis import connect
from queues.connection import async_client
from queues.names import qualified_name

from . import conf
from .keys import ApiKeys


@lru_cache(maxsize=8)
def _client_for(url: str) -> redis.Redis:
    made: redis.Redis = connect(url)
    return made


def client() -> redis.Redis:
    """The process's client for the Redis in settings (one per URL)."""
    return _client_for(conf.get().redis_url)


def new_async_client() -> Any:
    """A fresh asyncio client (asyncio clients belong to one event loop)."""
    return async_client(conf.get().redis_url)


def keys() -> ApiKeys:
    """Key names under the namespace in settings."""
    return ApiKeys(conf.get().namespace)


def queue_key(queue: str) -> str:
    """`{prefix}:{queue}` of an API queue."""
    return qualified_name(conf.get().prefix, queue)
