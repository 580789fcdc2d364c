"""EveryPrimary requests on a Redis Cluster: CLIENT LIST is asked of each
primary, sync and asyncio, one list per node."""

from __future__ import annotations

import asyncio

from redis.asyncio.cluster import RedisCluster as AsyncCluster
from redis.cluster import RedisCluster

from queues.clients import client_lists
from queues.drive import run_async, run_sync


def _ports(nodes: list[list[dict[str, str]]]) -> set[str]:
    """The server port each list came from (CLIENT LIST's `laddr`)."""
    return {c["laddr"].rsplit(":", 1)[1] for clients in nodes for c in clients}


def test_client_list_of_every_primary(r: RedisCluster) -> None:
    primaries = {str(n.port) for n in r.get_primaries()}
    nodes = run_sync(client_lists(), r)
    assert len(nodes) == 3 and _ports(nodes) == primaries

    async def listed() -> list[list[dict[str, str]]]:
        node = r.get_primaries()[0]
        client = AsyncCluster(host=node.host, port=node.port, decode_responses=True)
        try:
            return await run_async(client_lists(), client)
        finally:
            await client.aclose()

    nodes = asyncio.run(listed())
    assert len(nodes) == 3 and _ports(nodes) == primaries
