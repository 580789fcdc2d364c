"""The one Redis client factory of both dashboard apps: one client per
process and Redis URL, the pages' and the API's the same object, with
timeouts short enough that a request over a dead Redis answers "Redis is not
answering" in seconds."""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from queues import Queue
from queues.connection import sync_client, sync_from_url

from . import conf

#: What a dead, unreachable or still-loading Redis raises (pages answer 503).
REDIS_DOWN = (redis.ConnectionError, redis.TimeoutError)


def connect(url: str) -> Any:
    """A client decoding as the queue core does, with the dashboard's timeouts,
    so that a request to an unreachable Redis fails in seconds, not minutes
    (timeouts in the URL's query string win)."""
    c = conf.get()
    return sync_client(
        sync_from_url(
            url,
            socket_connect_timeout=c.redis_connect_timeout_s,
            socket_timeout=c.redis_timeout_s,
            decode_responses=True,
            encoding_errors="surrogateescape",
        )
    )


_client_lock = threading.Lock()


def client() -> redis.Redis:
    """The process's client for the Redis in settings (a cluster client on a
    cluster, which serves the same commands). A cluster client asks a node for
    the cluster's layout when made: none answering raises a ConnectionError,
    so requests answer the 503 of a dead Redis (nothing is cached: the next
    request tries again). Made under a lock: threads that both found none
    would each make one, and the one not kept, dropped, closes its pool
    under the pipeline its caller still runs ("Bad file descriptor")."""
    url = conf.get().redis_url
    with _client_lock:
        return _client_for(url)


@lru_cache(maxsize=8)
def _client_for(url: str) -> redis.Redis:
    try:
        made: redis.Redis = connect(url)
    except RedisClusterException as exc:
        raise redis.ConnectionError(str(exc)) from exc
    return made


@lru_cache(maxsize=1024)
def queue_on(conn: redis.Redis, prefix: str, name: str) -> Queue:
    """The Queue object of `prefix:name` on `conn`, made once and reused (a
    Queue registers its scripts when made)."""
    return Queue(name, conn, prefix)


def queue(prefix: str, name: str) -> Queue:
    """The Queue object of `prefix:name` on the process's client."""
    return queue_on(client(), prefix, name)


def reset() -> None:
    """Forget the clients and the Queue objects (tests point settings elsewhere)."""
    with _client_lock:
        _client_for.cache_clear()
    queue_on.cache_clear()
