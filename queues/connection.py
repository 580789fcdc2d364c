"""redis-py clients for the queue core, from a URL or a client, always
decoding replies to str."""

from __future__ import annotations

import inspect
from typing import Any, Union

import redis
import redis.asyncio as aioredis

ConnectionLike = Union[str, redis.Redis, aioredis.Redis, None]
DEFAULT_URL = "redis://127.0.0.1:6379/0"


def _decoding(client: Any) -> bool:
    return bool(client.connection_pool.connection_kwargs.get("decode_responses"))


def _kwargs_of(client: Any, **overrides: Any) -> dict[str, Any]:
    """The given client's connection settings, as keyword arguments of Redis()."""
    target = aioredis.Redis if isinstance(client, aioredis.Redis) else redis.Redis
    accepted = set(inspect.signature(target.__init__).parameters)
    kwargs = {k: v for k, v in client.connection_pool.connection_kwargs.items()
              if k in accepted}
    kwargs["decode_responses"] = True
    kwargs.update(overrides)
    return kwargs


def sibling_async_client(client: aioredis.Redis, **overrides: Any) -> aioredis.Redis:
    """A new asyncio client with the same settings (e.g. a blocking connection)."""
    return aioredis.Redis(**_kwargs_of(client, **overrides))


def sync_client(connection: ConnectionLike) -> redis.Redis:
    """A sync client with decode_responses on (the given one when it has it)."""
    if connection is None or isinstance(connection, str):
        return redis.Redis.from_url(connection or DEFAULT_URL, decode_responses=True)
    if isinstance(connection, redis.Redis) and _decoding(connection):
        return connection
    if isinstance(connection, (redis.Redis, aioredis.Redis)):
        return redis.Redis(**_kwargs_of(connection))
    raise TypeError(f"connection must be a redis URL or client, not {type(connection)!r}")


def async_client(connection: ConnectionLike) -> aioredis.Redis:
    """An asyncio client with decode_responses on (the given one when it has it)."""
    if connection is None or isinstance(connection, str):
        return aioredis.Redis.from_url(connection or DEFAULT_URL, decode_responses=True)
    if isinstance(connection, aioredis.Redis) and _decoding(connection):
        return connection
    if isinstance(connection, (redis.Redis, aioredis.Redis)):
        return aioredis.Redis(**_kwargs_of(connection))
    raise TypeError(f"connection must be a redis URL or client, not {type(connection)!r}")
