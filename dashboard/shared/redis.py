"""The pages' Redis client: one per process, with timeouts short enough that
a page over a dead Redis answers "Redis is not answering" in seconds."""

from __future__ import annotations

import threading
from functools import cache, lru_cache
from typing import Any

import redis
from django.conf import settings
from redis.exceptions import RedisClusterException

from queues import Queue
from queues.connection import sync_client, sync_from_url

#: What a dead, unreachable or still-loading Redis raises (pages answer 503).
REDIS_DOWN = (redis.ConnectionError, redis.TimeoutError)


#: The defaults of the settings read here (the same as dashboard.shared.conf's, which
#: this leaf the API shares does not import): a host project need not set them.
DEFAULTS: dict[str, Any] = {
    "BULLPEN_REDIS_CONNECT_TIMEOUT_S": 3.0,
    "BULLPEN_REDIS_TIMEOUT_S": 30.0,
    "BULLPEN_DISCOVERY_TTL_S": 30.0,
}


def setting(name: str) -> Any:
    """The Django setting `name`, else its default in DEFAULTS."""
    return getattr(settings, name, DEFAULTS[name])


def connect(url: str) -> Any:
    """A client decoding as the queue core does, with the dashboard's timeouts,
    so that a request to an unreachable Redis fails in seconds, not minutes
    (timeouts in the URL's query string win)."""
    return sync_client(
        sync_from_url(
            url,
            socket_connect_timeout=setting("BULLPEN_REDIS_CONNECT_TIMEOUT_S"),
            socket_timeout=setting("BULLPEN_REDIS_TIMEOUT_S"),
            decode_responses=True,
            encoding_errors="surrogateescape",
        )
    )


_client_lock = threading.Lock()


def client() -> redis.Redis:
    """One client per process for the pages (a cluster client on a cluster,
    which serves the same commands). A cluster client asks a node for the
    cluster's layout when made: none answering raises a ConnectionError, so
    pages answer the 503 of a dead Redis (nothing is cached: the next
    request tries again). Made under a lock: threads that both found none
    would each make one, and the one not kept, dropped, closes its pool
    under the pipeline its caller still runs ("Bad file descriptor")."""
    with _client_lock:
        return _made_client()


@cache
def _made_client() -> redis.Redis:
    try:
        made: redis.Redis = connect(settings.REDIS_URL)
    except RedisClusterException as exc:
        raise redis.ConnectionError(str(exc)) from exc
    return made


@lru_cache(maxsize=1024)
def queue_on(conn: redis.Redis, prefix: str, name: str) -> Queue:
    """The Queue object of `prefix:name` on `conn`, made once and reused (a
    Queue registers its scripts when made)."""
    return Queue(name, conn, prefix)


def queue(prefix: str, name: str) -> Queue:
    """The Queue object of `prefix:name` on the pages' client."""
    return queue_on(client(), prefix, name)


def reset() -> None:
    """Forget the client and the Queue objects (tests point settings elsewhere)."""
    _made_client.cache_clear()
    queue_on.cache_clear()
