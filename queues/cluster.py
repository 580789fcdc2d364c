"""Redis Cluster: `redis+cluster://` URLs, cluster clients of either flavour,
and the hash-tag rule that keeps each queue's keys in one slot.

The URL form is ``redis+cluster://[[user]:password@]host[:port][,host[:port]...]``
(``rediss+cluster://`` for TLS; port 6379 by default): any reachable nodes
of the cluster, from which the client learns the rest. There is no db: a
cluster has only db 0.

A BullMQ queue's scripts touch many of its keys at once, so on a cluster
every key of a queue must hash to one slot. Redis hashes only the part of a
key between the first ``{`` and the next ``}`` when there is one (a hash
tag), so a prefix such as ``{bull}`` (every queue in one slot, BullMQ's
convention) or a queue name such as ``{render}`` (one slot per queue) does it;
`check_queue_slot` refuses a queue without one (docs/protocol.md §1.1).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio.cluster as aiocluster
import redis.cluster
from redis.crc import key_slot

from .exceptions import QueueError
from .urlparts import address, split_netloc

SCHEMES = ("redis+cluster", "rediss+cluster")
DEFAULT_PORT = 6379
_CLUSTERS = (redis.cluster.RedisCluster, aiocluster.RedisCluster)


class NoHashTag(QueueError):
    """A queue whose keys would spread over several slots of a cluster."""


class FlowAcrossSlots(QueueError):
    """A flow whose jobs would land in more than one slot of a cluster."""


@dataclass(frozen=True)
class ClusterUrl:
    """What a `redis+cluster://` URL names."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    tls: bool = False


def is_cluster_url(url: str) -> bool:
    """Whether `url` is a `redis+cluster://` or `rediss+cluster://` URL."""
    lowered = url.lower()
    return any(lowered.startswith(s + "://") for s in SCHEMES)


def _bad(url: str, why: str) -> ValueError:
    scheme = url.split("://", 1)[0]
    shown = url.split("@", 1)[1] if "@" in url else url.split("://", 1)[-1]
    return ValueError(f"bad Redis Cluster URL {scheme}://{shown}: {why}")


def parse_cluster_url(url: str) -> ClusterUrl:
    """The nodes and credentials of a `redis+cluster://` URL; ValueError with
    one sentence saying what is wrong with a bad one."""
    if not is_cluster_url(url):
        raise ValueError(f"not a redis+cluster:// URL: {url!r}")
    scheme, _, rest = url.partition("://")
    if "?" in rest or "#" in rest:
        raise _bad(url, "query options and fragments are not supported")
    netloc, _, path = rest.partition("/")
    if path.strip("/") not in ("", "0"):
        raise _bad(url, "a cluster has no databases but db 0 (leave the path out)")
    username, password, hosts = split_netloc(netloc)
    if not hosts:
        raise _bad(url, "no node (host:7000[,host2:7001])")
    try:
        nodes = tuple(address(item, DEFAULT_PORT, "node") for item in hosts.split(","))
    except ValueError as exc:
        raise _bad(url, str(exc)) from None
    return ClusterUrl(nodes, username, password, scheme.lower().startswith("rediss"))


#: The answer of is_cluster_client by client class: redis-py's cluster
#: classes are Protocols, whose isinstance costs a worker 3-4 us per job.
_cluster_classes: dict[type, bool] = {}


def is_cluster_client(client: Any) -> bool:
    """Whether `client` is a redis-py cluster client (either flavour)."""
    kind = type(client)
    found = _cluster_classes.get(kind)
    if found is None:
        found = _cluster_classes[kind] = issubclass(kind, _CLUSTERS)
    return found


def _flavour_class(flavour: Any) -> Any:
    """The cluster class of a flavour (redis.Redis or redis.asyncio.Redis)."""
    return (
        redis.cluster.RedisCluster
        if flavour is redis.Redis
        else aiocluster.RedisCluster
    )


def _make(flavour: Any, nodes: Any, **kwargs: Any) -> Any:
    cls = _flavour_class(flavour)
    node_cls = (
        redis.cluster.ClusterNode if flavour is redis.Redis else aiocluster.ClusterNode
    )
    accepted = set(inspect.signature(cls.__init__).parameters)
    if cls is redis.cluster.RedisCluster:
        accepted |= set(redis.cluster.REDIS_ALLOWED_KEYS)
    for unwanted in ("db", "host", "port", "connection_pool", "path"):
        kwargs.pop(unwanted, None)
    kept = {k: v for k, v in kwargs.items() if k in accepted}
    return cls(startup_nodes=[node_cls(h, p) for h, p in nodes], **kept)


def from_url(flavour: Any, url: str, **kwargs: Any) -> Any:
    """A cluster client of `flavour` (redis.Redis or redis.asyncio.Redis) for
    a `redis+cluster://` URL."""
    parsed = parse_cluster_url(url)
    if parsed.password is not None:
        kwargs.setdefault("password", parsed.password)
    if parsed.username is not None:
        kwargs.setdefault("username", parsed.username)
    if parsed.tls:
        kwargs.setdefault("ssl", True)
    return _make(flavour, parsed.nodes, **kwargs)


def _nodes_and_kwargs(client: Any) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    if isinstance(client, redis.cluster.RedisCluster):
        manager = client.nodes_manager
        nodes = [(n.host, n.port) for n in manager.startup_nodes.values()]
        return nodes, dict(manager.connection_kwargs)
    nodes = [(n.host, n.port) for n in client.startup_nodes]
    return nodes, dict(client.connection_kwargs)


def connection_kwargs(client: Any) -> dict[str, Any]:
    """The connection settings of a cluster client (either flavour)."""
    return _nodes_and_kwargs(client)[1]


def sibling(
    client: Any, flavour: Any, overrides: dict[str, Any], bound: set[str]
) -> Any:
    """A new cluster client of `flavour` on the nodes `client` started from,
    with its connection settings (those named in `bound` only for the same
    flavour) and `overrides`."""
    nodes, kwargs = _nodes_and_kwargs(client)
    same = isinstance(client, redis.cluster.RedisCluster) == (flavour is redis.Redis)
    for internal in ("response_callbacks", "himport_registry", "cache"):
        kwargs.pop(internal, None)
    if not same:  # a connection class is one flavour's too
        kwargs = {
            k: v
            for k, v in kwargs.items()
            if k not in bound and k != "connection_class"
        }
    if isinstance(client, aiocluster.RedisCluster) and "retry" not in overrides:
        kwargs.pop("retry", None)  # a per-connection Retry; the client's own is kept
    kwargs.update(overrides)
    return _make(flavour, nodes, **kwargs)


# --- slots ------------------------------------------------------------------
def hash_tag(text: str) -> str | None:
    """The hash tag of a key that starts with `text`, when `text` alone fixes
    it: the part between its first ``{`` and the next ``}``, non-empty."""
    start = text.find("{")
    if start < 0:
        return None
    end = text.find("}", start + 1)
    if end <= start + 1:
        return None
    return text[start + 1 : end]


def slot_of(key: str) -> int:
    """The cluster slot of `key`."""
    return key_slot(key.encode("utf-8", "surrogateescape"))


def check_queue_slot(prefix: str, name: str) -> int:
    """The one slot of every key of queue `name` under `prefix`; NoHashTag,
    saying how to fix it, when its keys would not share one."""
    base = f"{prefix}:{name}:"
    if hash_tag(base) is None:
        raise NoHashTag(
            f"queue {name!r} with prefix {prefix!r} cannot run on a Redis Cluster: "
            f"its keys would land in different slots. Give the prefix a hash tag "
            f"(prefix='{{{prefix}}}' puts every queue in one slot, BullMQ's "
            f"convention) or the queue name one (e.g. name '{{{name}}}', one slot "
            f"per queue), and use the same prefix and name in every client, "
            f"Node's included"
        )
    return slot_of(base)


SyncCluster = redis.cluster.RedisCluster
AsyncCluster = aiocluster.RedisCluster


def check_for(client: Any, prefix: str, name: str) -> None:
    """On a cluster client, refuse a queue whose keys would not share a slot
    (see `check_queue_slot`); elsewhere nothing."""
    if is_cluster_client(client):
        check_queue_slot(prefix, name)


async def node_client(client: AsyncCluster, key: str, **overrides: Any) -> Any:
    """A plain asyncio client on the primary that serves `key`'s slot, with
    `client`'s settings and `overrides` (the caller closes it). redis-py's
    asyncio cluster runs a MULTI/EXEC in a thread of its own, leaving that
    connection bound to another event loop, so a transaction goes through
    this client instead; so does a worker's blocking read, whose connection
    must be its one named connection (a cluster client also names the
    connections it learns the cluster through)."""
    import redis.asyncio as aioredis

    await client.initialize()  # the slot map (a no-op once known)
    node = client.get_node_from_key(key)
    if node is None:
        raise ConnectionError(f"no primary serves the slot of {key!r} now")
    accepted = set(inspect.signature(aioredis.Redis.__init__).parameters)
    kwargs = {
        k: v
        for k, v in connection_kwargs(client).items()
        if k in accepted and k not in ("connection_class", "retry", "host", "port")
    }
    kwargs.update(overrides)
    return aioredis.Redis(host=node.host, port=int(node.port), **kwargs)
