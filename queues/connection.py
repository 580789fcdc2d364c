"""redis-py clients for the queue core, from a URL or a client.

Every client decodes replies to str with `surrogateescape`, so a hash holding
bytes that are not UTF-8 (written by another client) still reads, and is
reported as a malformed job instead of failing a whole reply.
"""

from __future__ import annotations

import inspect
from typing import Any, Union

import redis
import redis.asyncio as aioredis

ConnectionLike = Union[str, redis.Redis, aioredis.Redis, None]
DEFAULT_URL = "redis://127.0.0.1:6379/0"
_DECODING: dict[str, Any] = {
    "decode_responses": True,
    "encoding_errors": "surrogateescape",
}
#: Connection settings that belong to one flavour (sync or asyncio) only.
_FLAVOUR_BOUND = {"retry", "redis_connect_func", "connection_pool", "event_dispatcher"}


def _ours(client: Any) -> bool:
    kwargs = client.connection_pool.connection_kwargs
    return bool(kwargs.get("decode_responses")) and (
        kwargs.get("encoding_errors") == "surrogateescape"
    )


def _kwargs_of(client: Any, target: type, **overrides: Any) -> dict[str, Any]:
    """The client's connection settings as keyword arguments of `target`."""
    accepted = set(inspect.signature(target).parameters)
    source = dict(client.connection_pool.connection_kwargs)
    if "path" in source:
        source["unix_socket_path"] = source.pop("path")
    if "SSL" in client.connection_pool.connection_class.__name__:
        source["ssl"] = True
    same_flavour = isinstance(client, aioredis.Redis) == (target is aioredis.Redis)
    kwargs = {
        k: v
        for k, v in source.items()
        if k in accepted and (same_flavour or k not in _FLAVOUR_BOUND)
    }
    kwargs.update(_DECODING)
    kwargs.update(overrides)
    return kwargs


def sync_client(connection: ConnectionLike) -> redis.Redis:
    """A sync client (the given one when it already decodes as we need)."""
    if connection is None or isinstance(connection, str):
        return redis.Redis.from_url(connection or DEFAULT_URL, **_DECODING)
    if isinstance(connection, redis.Redis) and _ours(connection):
        return connection
    if isinstance(connection, (redis.Redis, aioredis.Redis)):
        return redis.Redis(**_kwargs_of(connection, redis.Redis))
    raise TypeError(
        f"connection must be a redis URL or client, not {type(connection)!r}"
    )


def async_client(connection: ConnectionLike) -> aioredis.Redis:
    """An asyncio client (the given one when it already decodes as we need)."""
    if connection is None or isinstance(connection, str):
        return aioredis.Redis.from_url(connection or DEFAULT_URL, **_DECODING)
    if isinstance(connection, aioredis.Redis) and _ours(connection):
        return connection
    if isinstance(connection, (redis.Redis, aioredis.Redis)):
        return aioredis.Redis(**_kwargs_of(connection, aioredis.Redis))
    raise TypeError(
        f"connection must be a redis URL or client, not {type(connection)!r}"
    )


def sibling_async_client(client: aioredis.Redis, **overrides: Any) -> aioredis.Redis:
    """A new asyncio client with the same settings (e.g. a blocking connection)."""
    return aioredis.Redis(**_kwargs_of(client, aioredis.Redis, **overrides))
