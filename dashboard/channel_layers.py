"""The channel layer of the live sockets (CHANNEL_LAYERS): channels-redis on
the queues' Redis, in memory on a Redis Cluster. A host project mounting the
dashboard can use `channel_layers()` in its own settings."""

from __future__ import annotations

from queues.cluster import is_cluster_url

from .shared.conf import DEFAULTS


def channel_layer_host(
    url: str,
    connect_timeout_s: float = DEFAULTS.redis_connect_timeout_s,
    timeout_s: float = DEFAULTS.redis_timeout_s,
) -> dict[str, object]:
    """The channel layer's connection to `url`. channels-redis blocks 5 s per
    receive (BZPOPMIN), and redis-py 8 reads with a 5 s timeout unless told
    otherwise: an idle receive would fail every 5 s, and live updates would
    stall while the hub backs off."""
    return {
        "address": url,
        "socket_connect_timeout": connect_timeout_s,
        "socket_timeout": max(timeout_s, 10.0),
    }


def channel_layers(
    url: str,
    prefix: str,
    connect_timeout_s: float = DEFAULTS.redis_connect_timeout_s,
    timeout_s: float = DEFAULTS.redis_timeout_s,
) -> dict[str, object]:
    """The channel layer on `url`. On a Redis Cluster, which channels-redis
    cannot use (its scripts touch a group's channels, spread over slots, at
    once), one in memory: control messages then reach this process's sockets
    at once and other processes' at their next access check (30 s)."""
    if is_cluster_url(url):
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    config = {
        "hosts": [channel_layer_host(url, connect_timeout_s, timeout_s)],
        "prefix": prefix,
        # Messages one server process may have queued before it reads them.
        "capacity": 1000,
        "expiry": 30,
    }
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": config,
        }
    }
