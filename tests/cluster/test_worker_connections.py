"""A worker's named connection on a cluster: one, on the primary of its
queue's slot. Node's getWorkers() reads the node with the most named
connections of the queue. A worker's blocking client is a plain connection
to that primary: a cluster client names the connections it learns the
cluster through too (and more when it reloads the slot map under load), so
a Bullpen worker was listed twice, or Node's list showed a node other than
the queue's (found by tests/cluster/test_interop.py's mixed workers
scenario, and by this test under a loaded `make test`)."""

from __future__ import annotations

from typing import Any

from redis.cluster import RedisCluster

from queues import Queue
from queues.clients import worker_connection_name
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread


async def _noop(job: Any) -> None:
    return None


def _named(r: RedisCluster, prefix: str) -> dict[int, list[str]]:
    """{primary port: names of its connections starting with `prefix`}."""
    return {
        int(node.port): sorted(
            c["name"]
            for c in r.client_list(target_nodes=node)
            if c["name"].startswith(prefix)
        )
        for node in r.get_primaries()
    }


def test_one_named_connection_per_worker_on_its_slot(
    redis_url: str, q: Queue, r: RedisCluster
) -> None:
    """Two idle workers of one queue: each has exactly one named connection,
    on the primary that serves the queue's keys, and none elsewhere."""
    owner = int(r.get_node_from_key(q.keys.marker).port)
    names = [worker_connection_name("bull", q.name, w) for w in ("w1", "w2")]
    queue_named = worker_connection_name("bull", q.name, None)
    with (
        worker_thread(q.name, _noop, redis_url, worker_name="w1"),
        worker_thread(q.name, _noop, redis_url, worker_name="w2"),
    ):
        wait_until(
            lambda: set(_named(r, queue_named)[owner]) >= set(names),
            10,
            what="both workers' named connections",
        )
        listed = _named(r, queue_named)
    assert listed == {port: (names if port == owner else []) for port in listed}, (
        f"the queue's slot is on {owner}"
    )
