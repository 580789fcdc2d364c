"""What the Redis server says of itself: INFO of the server, or of every
primary of a cluster, one round trip per node (for /metrics' Redis families;
one INFO is a few KB whatever the number of keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queues.cluster import is_cluster_client

from ..redis import client


@dataclass(frozen=True)
class NodeInfo:
    """One server's INFO (all default sections, parsed by redis-py)."""

    node: str  # host:port, or the unix socket's path
    info: dict[str, Any]

    def number(self, field: str) -> float:
        """A numeric INFO field, 0 when absent or not a number."""
        value = self.info.get(field)
        return float(value) if isinstance(value, (int, float)) else 0.0


def _address(kwargs: dict[str, Any]) -> str:
    if kwargs.get("path"):
        return str(kwargs["path"])
    return f"{kwargs.get('host', '')}:{kwargs.get('port', '')}"


def primaries_info() -> list[NodeInfo]:
    """INFO of the server, or of each primary of a cluster (by address)."""
    conn: Any = client()
    if is_cluster_client(conn):
        return [
            NodeInfo(f"{node.host}:{node.port}", conn.info(target_nodes=node))
            for node in conn.get_primaries()
        ]
    address = _address(conn.connection_pool.connection_kwargs)
    return [NodeInfo(address, conn.info())]
