"""redis-py clients for the queue core, from a URL or a client.

Every client decodes replies to str with `surrogateescape`, so a hash holding
bytes that are not UTF-8 (written by another client) still reads, and is
reported as a malformed job instead of failing a whole reply.
"""

from __future__ import annotations

import inspect
import socket
from typing import Any, Union

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from . import cluster, sentinel
from .packing import HIREDIS_PACK, HiredisPacking, hiredis_packing, surrogate_safe

ConnectionLike = Union[str, redis.Redis, aioredis.Redis, Any, None]
DEFAULT_URL = "redis://127.0.0.1:6379/0"
_DECODING: dict[str, Any] = {
    "decode_responses": True,
    "encoding_errors": "surrogateescape",
}
#: Connection settings that belong to one flavour (sync or asyncio) only.
_FLAVOUR_BOUND = {"retry", "redis_connect_func", "connection_pool", "event_dispatcher"}


def _fast(client: Any) -> Any:
    """`client` (one this module made) with hiredis packing its commands (a
    cluster client packs as redis-py does)."""
    if cluster.is_cluster_client(client):
        return client
    pool = client.connection_pool
    utf8 = pool.connection_kwargs.get("encoding", "utf-8") == "utf-8"
    if HIREDIS_PACK is not None and utf8:
        if not issubclass(pool.connection_class, HiredisPacking):
            pool.connection_class = hiredis_packing(pool.connection_class)
    return client


def _pool_kwargs(client: Any) -> dict[str, Any]:
    """The connection settings of a client (a plain, Sentinel or cluster one)."""
    if cluster.is_cluster_client(client):
        return cluster.connection_kwargs(client)
    return client.connection_pool.connection_kwargs  # type: ignore[no-any-return]


def _ours(client: Any) -> bool:
    kwargs = _pool_kwargs(client)
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


def _from_url(flavour: Any, url: str, **kwargs: Any) -> Any:
    """A client of `flavour` for any URL Bullpen takes: redis://, rediss://,
    unix://, redis+sentinel:// or redis+cluster://."""
    if cluster.is_cluster_url(url):
        return cluster.from_url(flavour, url, **kwargs)
    return sentinel.from_url(flavour, url, **kwargs)


def sync_from_url(url: str, **kwargs: Any) -> Any:
    """A sync client for any URL Bullpen takes, with redis-py's settings
    `kwargs` (a `redis.cluster.RedisCluster` for a cluster)."""
    return _from_url(redis.Redis, url, **kwargs)


def async_from_url(url: str, **kwargs: Any) -> Any:
    """An asyncio client for any URL Bullpen takes (see `sync_from_url`)."""
    return _from_url(aioredis.Redis, url, **kwargs)


def async_waiting_client(url: str, max_connections: int, **kwargs: Any) -> Any:
    """An asyncio client whose pool, with all `max_connections` busy, waits
    for one to come back (on Sentinel too); a cluster client raises instead
    (redis-py's asyncio cluster has no waiting pool; its limit is per node)."""
    if cluster.is_cluster_url(url):
        return cluster.from_url(
            aioredis.Redis, url, max_connections=max_connections, **kwargs
        )
    return sentinel.async_waiting_client(url, max_connections, **kwargs)


def _is_sync(client: Any) -> bool:
    return isinstance(client, (redis.Redis, cluster.SyncCluster))


def _is_async(client: Any) -> bool:
    return isinstance(client, (aioredis.Redis, cluster.AsyncCluster))


def sync_client(connection: ConnectionLike) -> Any:
    """A sync client (the given one when it already decodes as we need); a
    `redis.cluster.RedisCluster` for a cluster."""
    if connection is None or isinstance(connection, str):
        made = _from_url(redis.Redis, connection or DEFAULT_URL, **_DECODING)
        return made if cluster.is_cluster_client(made) else surrogate_safe(made)
    if cluster.is_cluster_client(connection):
        if _is_sync(connection) and _ours(connection):
            return connection
        return sibling_sync_client(connection)
    if isinstance(connection, redis.Redis) and _ours(connection):
        return surrogate_safe(connection)
    if isinstance(connection, (redis.Redis, aioredis.Redis)):
        return surrogate_safe(sibling_sync_client(connection))
    raise TypeError(
        f"connection must be a redis URL or client, not {type(connection)!r}"
    )


def async_client(connection: ConnectionLike) -> Any:
    """An asyncio client (the given one when it already decodes as we need); a
    `redis.asyncio.cluster.RedisCluster` for a cluster."""
    if connection is None or isinstance(connection, str):
        return _fast(_from_url(aioredis.Redis, connection or DEFAULT_URL, **_DECODING))
    if cluster.is_cluster_client(connection):
        if _is_async(connection) and _ours(connection):
            return connection
        return sibling_async_client(connection)
    if isinstance(connection, aioredis.Redis) and _ours(connection):
        return connection
    if isinstance(connection, (redis.Redis, aioredis.Redis)):
        return sibling_async_client(connection)
    raise TypeError(
        f"connection must be a redis URL or client, not {type(connection)!r}"
    )


def _dead_server_options() -> dict[int, int]:
    """TCP options that notice a dead server or network without a read
    timeout: keepalive probes on an idle connection (30 s, then 3 x 5 s) and,
    for a command the server never acknowledges, TCP_USER_TIMEOUT (30 s)
    where the platform has it (Linux)."""
    wanted = [
        ("TCP_KEEPIDLE", 30),
        ("TCP_KEEPALIVE", 30),  # macOS's name for it
        ("TCP_KEEPINTVL", 5),
        ("TCP_KEEPCNT", 3),
        ("TCP_USER_TIMEOUT", 30_000),
    ]
    options: dict[int, int] = {}
    for name, value in wanted:
        constant = getattr(socket, name, None)
        if constant is not None and constant not in options:
            options[constant] = value
    return options


def _tcp_options(url_or_kwargs: str | dict[str, Any]) -> dict[str, Any]:
    """Keepalive settings that notice a dead server without a read timeout
    (none for a local socket, which has no network to lose)."""
    if isinstance(url_or_kwargs, str):
        local = url_or_kwargs.startswith("unix:")
    else:
        local = "path" in url_or_kwargs
    if local:
        return {}
    return {
        "socket_keepalive": True,
        "socket_keepalive_options": _dead_server_options(),
    }


def worker_client(
    connection: ConnectionLike, max_connections: int | None = None
) -> Any:
    """A worker's own asyncio client: `async_client(connection)`, except
    that one made from a URL waits for replies without a per-command read
    timeout, as BullMQ's workers do (ioredis has none by default). redis-py
    8's 5 s default costs each command a timer and a task (about 25 us of
    CPU, most of what one job costs a worker at concurrency 1); TCP keepalive
    and TCP_USER_TIMEOUT still notice a dead server within about 45 s, and a
    URL's own socket_timeout still wins. A client passed in is used as it
    is, unless its pool holds fewer than `max_connections` (redis-py's
    default is 100): then a sibling with that many is made, since every job
    of a worker may talk to Redis at once (progress, logs)."""
    sizing: dict[str, Any] = {}
    if max_connections is not None:
        sizing["max_connections"] = max_connections
    if connection is None or isinstance(connection, str):
        url = connection or DEFAULT_URL
        return _fast(
            _from_url(
                aioredis.Redis,
                url,
                socket_timeout=None,
                **_tcp_options(url),
                **sizing,
                **_DECODING,
            )
        )
    client = async_client(connection)
    if max_connections_of(client) < (max_connections or 0):
        return sibling_async_client(client, **sizing)
    return client


def sent_once_client(client: Any) -> Any:
    """A sibling of `client` on which redis-py never sends a command twice,
    for the scripts that claim or finish jobs.

    redis-py retries a command whose reply did not come (a read timeout, a
    dropped connection) by sending it again; the first one may have run, so
    a finish would be applied twice (the second reports a lost lock) and a
    claim would take jobs nobody then processes until the stalled check.
    Here nothing is retried and replies are awaited without a read timeout
    (a script that ran long has still run; TCP keepalive notices a dead
    server), whatever the settings of the client or URL the user gave; the
    caller decides what to do about a reply that never came."""
    kwargs = _pool_kwargs(client)
    tcp = {} if kwargs.get("socket_keepalive") else _tcp_options(kwargs)
    return sibling_async_client(
        client,
        retry=Retry(NoBackoff(), 0),
        socket_timeout=None,
        max_connections=max_connections_of(client),
        **tcp,
    )


def max_connections_of(client: Any) -> int:
    """How many connections the client's pool holds (per node on a cluster)."""
    if cluster.is_cluster_client(client):
        found = cluster.connection_kwargs(client).get("max_connections")
        return int(found or 2**31)
    return int(client.connection_pool.max_connections)


#: A blocking command's connection waits this much longer than the command
#: itself before it calls the server dead.
BLOCKING_READ_MARGIN_S = 5.0


_defaults: dict[tuple[type, str], Any] = {}


def _default_of(cls: type, parameter: str) -> Any:
    """The default of a connection class's constructor parameter (looked up
    through its bases, as subclasses take **kwargs), else None."""
    if (cls, parameter) not in _defaults:
        _defaults[cls, parameter] = _find_default(cls, parameter)
    return _defaults[cls, parameter]


def _find_default(cls: type, parameter: str) -> Any:
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        found = inspect.signature(init).parameters.get(parameter)
        if found is not None and found.default is not inspect.Parameter.empty:
            return found.default
    return None


def for_blocking(client: Any, block_s: float) -> Any:
    """`client`, or a sibling of the same flavour whose socket read timeout
    outlasts a command that blocks up to `block_s` seconds.

    redis-py 8 reads with a 5 s timeout by default, so an XREAD BLOCK 10000
    (or a BZPOPMIN 5) on an idle key fails with TimeoutError instead of
    returning nothing. A client without a read timeout, or with a longer one,
    is returned as it is."""
    kwargs = _pool_kwargs(client)
    if "socket_timeout" in kwargs:
        current = kwargs["socket_timeout"]
    elif cluster.is_cluster_client(client):
        current = 5.0  # redis-py's default for a cluster's connections
    else:
        current = _default_of(client.connection_pool.connection_class, "socket_timeout")
    if current is None or current > block_s:
        return client
    timeout = block_s + BLOCKING_READ_MARGIN_S
    if _is_async(client):
        return sibling_async_client(client, socket_timeout=timeout)
    return sibling_sync_client(client, socket_timeout=timeout)


def _sibling(client: Any, flavour: type, overrides: dict[str, Any]) -> Any:
    """A new client of class `flavour` with the settings of `client` (either
    flavour): on the same sentinels or cluster when `client` is on them."""
    if cluster.is_cluster_client(client):
        return cluster.sibling(
            client, flavour, {**_DECODING, **overrides}, _FLAVOUR_BOUND
        )
    kwargs = _kwargs_of(client, flavour, **overrides)
    if sentinel.is_sentinel_client(client):
        return sentinel.sibling(client, flavour, kwargs, _FLAVOUR_BOUND)
    return flavour(**kwargs)


def sibling_sync_client(client: Any, **overrides: Any) -> Any:
    """A new sync client with the settings of `client` (either flavour); one
    made by `Sentinel.master_for` has a sibling on the same sentinels, a
    cluster one on the same cluster."""
    return _sibling(client, redis.Redis, overrides)


def sibling_async_client(client: Any, **overrides: Any) -> Any:
    """A new asyncio client with the same settings (e.g. a blocking connection);
    one made by `Sentinel.master_for` has a sibling on the same sentinels, a
    cluster one on the same cluster."""
    return _fast(_sibling(client, aioredis.Redis, overrides))
