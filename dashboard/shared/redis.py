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


#: The most a readiness probe waits for Redis (connect, then PING's reply):
#: an orchestrator's probe gives up after a second or a few, and a probe
#: that waited a page's timeout (30 s by default) on a hung Redis would hold
#: a server thread per probe meanwhile.
PROBE_TIMEOUT_S = 2.0


def connect(url: str, most_s: float | None = None) -> Any:
    """A client decoding as the queue core does, with the dashboard's timeouts,
    so that a request to an unreachable Redis fails in seconds, not minutes
    (timeouts in the URL's query string win); `most_s` caps both."""
    c = conf.get()
    connect_s, reply_s = c.redis_connect_timeout_s, c.redis_timeout_s
    if most_s is not None:
        connect_s, reply_s = min(connect_s, most_s), min(reply_s, most_s)
    return sync_client(
        sync_from_url(
            url,
            socket_connect_timeout=connect_s,
            socket_timeout=reply_s,
            decode_responses=True,
            encoding_errors="surrogateescape",
        )
    )


_client_lock = threading.Lock()


def client(most_s: float | None = None) -> redis.Redis:
    """The process's client for the Redis in settings (a cluster client on a
    cluster, which serves the same commands). A cluster client asks a node for
    the cluster's layout when made: none answering raises a ConnectionError,
    so requests answer the 503 of a dead Redis (nothing is cached: the next
    request tries again). Made under a lock: threads that both found none
    would each make one, and the one not kept, dropped, closes its pool
    under the pipeline its caller still runs ("Bad file descriptor").
    `most_s` (readiness probes: PROBE_TIMEOUT_S): a client of its own whose
    connect and reply timeouts it caps, so that a probe never takes a page's
    connection nor a page's timeout."""
    url = conf.get().redis_url
    with _client_lock:
        return _client_for(url, most_s)


@lru_cache(maxsize=8)
def _client_for(url: str, most_s: float | None = None) -> redis.Redis:
    try:
        made: redis.Redis = connect(url, most_s)
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
