"""What the worker's parts share: the logger, safe text, naming."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..clients import worker_connection_name
from ..cluster import is_cluster_client
from ..job import Job

log = logging.getLogger("queues.worker")

Processor = Callable[[Job], Any]


def _text(value: str) -> str:
    """`value` made encodable as UTF-8 (a lone surrogate, as from undecodable
    bytes, becomes a \\udcxx escape), so the failure it describes can be saved."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def blocking_connection_name(prefix: str, queue: str, worker_name: str | None) -> str:
    """BullMQ's name for a worker connection, which Node's getWorkers() lists."""
    return worker_connection_name(prefix, queue, worker_name)


async def open_named_connection(client: Any, key: str) -> None:
    """Open the worker's named blocking connection now, on the node that
    serves `key` (the marker it blocks on): Node's getWorkers() lists named
    connections, and a busy worker may not block for a long time. On a
    cluster redis-py leaves the connections it set the client up through
    (CLUSTER SLOTS on a startup node, COMMAND on the default node) open and
    named too; Node's getWorkers() reads the node with the most named
    connections, so those would list the worker twice on one node or on
    another node than its queue's: they are closed first."""
    if not is_cluster_client(client):
        await client.ping()
        return
    await client.initialize()
    manager = client.nodes_manager
    for node in [*manager.startup_nodes.values(), *manager.nodes_cache.values()]:
        await node.disconnect()
    await client.execute_command("PING", target_nodes=client.get_node_from_key(key))
