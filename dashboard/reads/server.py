"""What the Redis server says of itself: INFO of the server, or of every
primary of a cluster, one round trip per node (for /metrics' Redis families
and the Redis page; one INFO is a few KB whatever the number of keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queues.cluster import is_cluster_client
from queues.sentinel import is_sentinel_client

from ..shared.redis import client


@dataclass(frozen=True)
class NodeInfo:
    """One server's INFO (all default sections, parsed by redis-py)."""

    node: str  # host:port, or the unix socket's path
    info: dict[str, Any]

    def number(self, field: str) -> float:
        """A numeric INFO field, 0 when absent or not a number."""
        value = self.info.get(field)
        return float(value) if isinstance(value, (int, float)) else 0.0


def address_of(kwargs: dict[str, Any]) -> str:
    """host:port of a client's connection kwargs, or its unix socket's path."""
    if kwargs.get("path"):
        return str(kwargs["path"])
    return f"{kwargs.get('host', '')}:{kwargs.get('port', '')}"


def primaries(conn: Any) -> list[tuple[str, Any]]:
    """(address, plain client) of the server, or of each primary of a cluster
    (its node's own client, which any per-server command can use)."""
    if is_cluster_client(conn):
        return [
            (f"{node.host}:{node.port}", conn.get_redis_connection(node))
            for node in conn.get_primaries()
        ]
    if is_sentinel_client(conn):
        host, port = conn.connection_pool.get_master_address()
        return [(f"{host}:{port}", conn)]  # the master the sentinels name now
    return [(address_of(conn.connection_pool.connection_kwargs), conn)]


def primaries_info() -> list[NodeInfo]:
    """INFO of the server, or of each primary of a cluster (by address)."""
    return [NodeInfo(address, c.info()) for address, c in primaries(client())]
