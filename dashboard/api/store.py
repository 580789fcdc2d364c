"""The API's Redis: the process's one client (dashboard.shared.redis, the
pages' too), a fresh asyncio client for SSE, and the keys."""

from __future__ import annotations

from typing import Any

import redis

from dashboard.shared import conf
from dashboard.shared import redis as shared_redis
from queues.connection import async_client
from queues.names import qualified_name

from .keys import ApiKeys


def client() -> redis.Redis:
    """The process's client for the Redis in settings (the pages' client)."""
    return shared_redis.client()


def new_async_client() -> Any:
    """A fresh asyncio client (asyncio clients belong to one event loop)."""
    return async_client(conf.get().redis_url)


def keys() -> ApiKeys:
    """Key names under the namespace in settings."""
    return ApiKeys(conf.get().namespace)


def queue_key(queue: str) -> str:
    """`{prefix}:{queue}` of an API queue."""
    return qualified_name(conf.get().prefix, queue)
