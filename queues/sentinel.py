"""Redis Sentinel: `redis+sentinel://` URLs, and clients that follow the
primary (master) a set of sentinels names, through failovers.

The URL form is ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/<master>[/<db>]``
(port 26379 by default, db 0); the password is the primary's, not the
sentinels'. `from_url` makes a client of either flavour from such a URL or a
plain one; `sibling` makes a client that goes through the same sentinels and
master name as a client made with `Sentinel.master_for`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis
import redis.asyncio as aioredis
import redis.asyncio.sentinel as aiosentinel
import redis.sentinel

from .defaults import SENTINEL_TIMEOUT_S
from .urlparts import address, split_netloc

SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379
_POOLS = (redis.sentinel.SentinelConnectionPool, aiosentinel.SentinelConnectionPool)
_SENTINELS: dict[Any, Any] = {
    redis.Redis: redis.sentinel.Sentinel,
    aioredis.Redis: aiosentinel.Sentinel,
}
#: Settings of the primary's connections that its sentinels' clients share.
_SENTINEL_SHARED = ("socket_keepalive", "socket_keepalive_options")


@dataclass(frozen=True)
class SentinelUrl:
    """What a `redis+sentinel://` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def is_sentinel_url(url: str) -> bool:
    """Whether `url` is a `redis+sentinel://` URL."""
    return url.lower().startswith(SCHEME + "://")


def _bad(url: str, why: str) -> ValueError:
    shown = url.split("@", 1)[1] if "@" in url else url.split("://", 1)[-1]
    return ValueError(f"bad Redis Sentinel URL {SCHEME}://{shown}: {why}")


def parse_sentinel_url(url: str) -> SentinelUrl:
    """The sentinels, master name, db and credentials of a `redis+sentinel://`
    URL; ValueError with one sentence saying what is wrong with a bad one."""
    if not is_sentinel_url(url):
        raise ValueError(f"not a {SCHEME}:// URL: {url!r}")
    rest = url[len(SCHEME) + 3 :]
    if "?" in rest or "#" in rest:
        raise _bad(url, "query options and fragments are not supported")
    netloc, _, path = rest.partition("/")
    username, password, hosts = split_netloc(netloc)
    if not hosts:
        raise _bad(url, "no sentinel host (host:26379[,host2:26379])")
    try:
        sentinels = tuple(
            address(item, DEFAULT_SENTINEL_PORT, "sentinel")
            for item in hosts.split(",")
        )
    except ValueError as exc:
        raise _bad(url, str(exc)) from None
    parts = path.split("/") if path else []
    if not parts or not parts[0]:
        raise _bad(url, "no master name (…/<master-name>/<db>)")
    if len(parts) > 2:
        raise _bad(url, "the path is /<master-name>[/<db>], nothing more")
    db = 0
    if len(parts) == 2 and parts[1] != "":
        if not parts[1].isdigit():
            raise _bad(url, f"db {parts[1]!r} is not a number")
        db = int(parts[1])
    return SentinelUrl(sentinels, unquote(parts[0]), db, username, password)


def _sentinel_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    shared = {k: kwargs[k] for k in _SENTINEL_SHARED if k in kwargs}
    return {
        "socket_timeout": SENTINEL_TIMEOUT_S,
        "socket_connect_timeout": SENTINEL_TIMEOUT_S,
        **shared,
    }


def _master(
    flavour: Any, sentinels: Any, master: str, sentinel_kwargs: Any, **kwargs: Any
) -> Any:
    kwargs.pop("connection_pool", None)
    kwargs.pop("host", None)
    kwargs.pop("port", None)
    make: Any = _SENTINELS[flavour]
    manager = make(sentinels, sentinel_kwargs=sentinel_kwargs)
    return manager.master_for(master, redis_class=flavour, **kwargs)


def from_url(flavour: Any, url: str, **kwargs: Any) -> Any:
    """A client of `flavour` (redis.Redis or redis.asyncio.Redis) for `url`: for
    a `redis+sentinel://` one, the primary its sentinels name (followed
    through failovers), else `flavour.from_url(url, **kwargs)`."""
    if not is_sentinel_url(url):
        return flavour.from_url(url, **kwargs)
    parsed = parse_sentinel_url(url)
    kwargs.setdefault("db", parsed.db)
    if parsed.password is not None:
        kwargs.setdefault("password", parsed.password)
    if parsed.username is not None:
        kwargs.setdefault("username", parsed.username)
    return _master(
        flavour,
        list(parsed.sentinels),
        parsed.master,
        _sentinel_kwargs(kwargs),
        **kwargs,
    )


def sync_from_url(url: str, **kwargs: Any) -> redis.Redis:
    """`from_url` for a sync client."""
    client: redis.Redis = from_url(redis.Redis, url, **kwargs)
    return client


def async_from_url(url: str, **kwargs: Any) -> aioredis.Redis:
    """`from_url` for an asyncio client."""
    client: aioredis.Redis = from_url(aioredis.Redis, url, **kwargs)
    return client


class WaitingSentinelPool(
    aiosentinel.SentinelConnectionPool, aioredis.BlockingConnectionPool
):
    """A pool on the primary its sentinels name that, with all its
    connections busy, waits for one to come back (BlockingConnectionPool's
    `get_connection` and `release`, the Sentinel pool's addressing)."""


def async_waiting_client(
    url: str, max_connections: int, **kwargs: Any
) -> aioredis.Redis:
    """An asyncio client whose pool, with all `max_connections` busy, waits
    for one to come back (a BlockingConnectionPool, or its Sentinel twin)."""
    if is_sentinel_url(url):
        return async_from_url(
            url,
            max_connections=max_connections,
            connection_pool_class=WaitingSentinelPool,
            **kwargs,
        )
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, **kwargs
    )
    return aioredis.Redis(connection_pool=pool)


def is_sentinel_client(client: Any) -> bool:
    """Whether `client` was made by `Sentinel.master_for` (either flavour)."""
    return isinstance(client.connection_pool, _POOLS)


def sibling(client: Any, flavour: Any, kwargs: dict[str, Any], bound: set[str]) -> Any:
    """A client of `flavour` with connection settings `kwargs`, on the master
    that `client` (a Sentinel one) follows, through the same sentinels (whose
    own settings named in `bound` are kept only for the same flavour)."""
    pool = client.connection_pool
    manager = pool.sentinel_manager
    sentinels = [
        (
            s.connection_pool.connection_kwargs["host"],
            s.connection_pool.connection_kwargs["port"],
        )
        for s in manager.sentinels
    ]
    same = isinstance(client, aioredis.Redis) == (flavour is aioredis.Redis)
    sentinel_kwargs = {
        k: v for k, v in manager.sentinel_kwargs.items() if same or k not in bound
    }
    return _master(flavour, sentinels, pool.service_name, sentinel_kwargs, **kwargs)
