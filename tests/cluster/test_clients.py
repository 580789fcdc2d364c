"""Cluster clients: `redis+cluster://` URLs, clients handed in by the user,
the hash-tag rule, and jobs that keep flowing while their slot migrates to
another primary (MOVED and ASK followed, TRYAGAIN waited out)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis.asyncio.cluster as aiocluster
from redis.cluster import RedisCluster

from queues import AsyncQueue, AsyncWorker, Job, Queue, QueueEvents
from queues.cluster import ClusterUrl, NoHashTag, parse_cluster_url, slot_of
from queues.connection import sync_client
from queues.devredis import RedisClusterSet
from tests.helpers import wait_until


@pytest.mark.parametrize(
    "url,expected",
    [
        (
            "redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
            ClusterUrl((("127.0.0.1", 7000), ("127.0.0.1", 7001))),
        ),
        (
            "redis+cluster://:s%40cret@h1,[::1]:7002",
            ClusterUrl((("h1", 6379), ("::1", 7002)), None, "s@cret"),
        ),
        (
            "rediss+cluster://app:pw@h:7000/",
            ClusterUrl((("h", 7000),), "app", "pw", tls=True),
        ),
    ],
)
def test_good_urls(url: str, expected: ClusterUrl) -> None:
    assert parse_cluster_url(url) == expected


@pytest.mark.parametrize(
    "url,why",
    [
        ("redis+cluster://", "no node"),
        ("redis+cluster://h:99999", "bad port"),
        ("redis+cluster://h:7000/3", "no databases but db 0"),
        ("redis+cluster://:pw@h:7000?x=1", "query options"),
        ("redis+cluster://:7000", "has no host"),
    ],
)
def test_bad_urls_say_why_in_one_line_without_the_password(url: str, why: str) -> None:
    with pytest.raises(ValueError) as bad:
        parse_cluster_url(url)
    message = str(bad.value)
    assert why in message and "\n" not in message and ":pw@" not in message


def test_a_queue_without_a_hash_tag_is_refused_with_the_fix(redis_url: str) -> None:
    with pytest.raises(NoHashTag) as refused:
        Queue("render", redis_url)
    message = str(refused.value)
    assert "prefix='{bull}'" in message and "'{render}'" in message
    Queue("render", redis_url, prefix="{bull}").close()  # the fix works
    Queue("{render}", redis_url).close()


def test_queue_and_worker_given_cluster_clients(redis_url: str, qname: str) -> None:
    """A RedisCluster the user made (not decoding) works for a sync queue;
    an asyncio RedisCluster for an async queue and a worker."""
    host, port = parse_cluster_url(redis_url).nodes[0]
    given = RedisCluster(host=host, port=port)
    queue = Queue(qname, given)
    job = queue.add("sum", {"xs": [1, 2, 3]})

    async def main() -> Any:
        aclient = aiocluster.RedisCluster(host=host, port=port)
        aqueue = AsyncQueue(qname, aclient)
        await aqueue.add("sum", {"xs": [4]})

        async def add(j: Job) -> int:
            return sum(j.data["xs"])

        worker = AsyncWorker(qname, add, connection=aclient)
        run = asyncio.create_task(worker.run(install_signals=False))
        for _ in range(200):
            if (await aqueue.get_counts("completed"))["completed"] == 2:
                break
            await asyncio.sleep(0.05)
        worker.close()
        await run
        await aclient.aclose()

    asyncio.run(main())
    assert queue.get_job(job.id).returnvalue == 6
    given.close()


# --- resharding ---------------------------------------------------------------
def _node_ids(cluster: RedisClusterSet) -> dict[int, str]:
    ids = {}
    for port in cluster.ports:
        client: Any = RedisCluster(host="127.0.0.1", port=port)
        ids[port] = client.get_node("127.0.0.1", port) and client.execute_command(
            "CLUSTER MYID", target_nodes=client.get_node("127.0.0.1", port)
        )
        client.close()
    return {p: (i.decode() if isinstance(i, bytes) else i) for p, i in ids.items()}


def _owner(cluster: RedisClusterSet, slot: int) -> int:
    client = sync_client(cluster.url)
    node = client.nodes_manager.get_node_from_slot(slot)
    client.close()
    return int(node.port)


def _migrate_slot(cluster: RedisClusterSet, slot: int, dst_port: int) -> int:
    """Move `slot` to the primary on `dst_port` the way `redis-cli --cluster
    reshard` does (IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT NODE),
    slowly enough that clients meet ASK and TRYAGAIN on the way; returns the
    keys moved."""
    import redis

    src_port = _owner(cluster, slot)
    ids = _node_ids(cluster)
    src = redis.Redis(port=src_port, decode_responses=True)
    dst = redis.Redis(port=dst_port, decode_responses=True)
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src_port])
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst_port])
    moved = 0
    while True:
        keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 5)
        if not keys:
            break
        src.execute_command(
            "MIGRATE", "127.0.0.1", dst_port, "", 0, 5000, "REPLACE", "KEYS", *keys
        )
        moved += len(keys)
        time.sleep(0.02)  # let traffic meet the half-moved slot
    for port in cluster.ports:
        node = redis.Redis(port=port)
        node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[dst_port])
        node.close()
    src.close()
    dst.close()
    return moved


def test_jobs_keep_flowing_while_their_slot_moves(
    redis_cluster: RedisClusterSet, redis_url: str, qname: str
) -> None:
    """A producer adds and a worker processes while the queue's slot migrates
    from one primary to another: every add is kept and completed once."""
    slot = slot_of(f"bull:{qname}:")
    src = _owner(redis_cluster, slot)
    dst = next(p for p in redis_cluster.ports if p != src)
    queue = Queue(qname, redis_url)
    added: list[str] = []
    stop = threading.Event()

    errors: list[BaseException] = []

    def produce() -> None:
        try:
            while not stop.is_set():
                added.append(queue.add("n", {"i": len(added)}).id)
                time.sleep(0.002)
        except BaseException as exc:
            errors.append(exc)
            raise

    runs: dict[str, int] = {}

    async def work() -> None:
        async def count(j: Job) -> None:
            runs[j.id] = runs.get(j.id, 0) + 1

        worker = AsyncWorker(qname, count, connection=redis_url, concurrency=4)
        task = asyncio.create_task(worker.run(install_signals=False))
        while not stop.is_set() or len(runs) < len(added):
            await asyncio.sleep(0.05)
            if stop.is_set() and time.monotonic() > deadline:
                break
        worker.close()
        await task

    deadline = float("inf")
    producer = threading.Thread(target=produce)
    consumer = threading.Thread(target=asyncio.run, args=(work(),))
    producer.start()
    consumer.start()
    wait_until(lambda: len(runs) > 100, 15, what="jobs before the move")
    moved = _migrate_slot(redis_cluster, slot, dst)
    after = len(added)
    wait_until(
        lambda: len(added) > after + 100 or errors, 15, what="adds after the move"
    )
    assert not errors
    deadline = time.monotonic() + 20
    stop.set()
    producer.join(10)
    consumer.join(30)
    print(f"\nslot {slot}: {moved} keys moved from :{src} to :{dst}; {len(added)} adds")
    assert _owner(redis_cluster, slot) == dst
    assert moved > 10
    counts = queue.get_counts()
    assert counts["completed"] == len(added), counts
    assert sorted(runs, key=int) == sorted(added, key=int)
    assert set(runs.values()) == {1}
    events = QueueEvents(qname, redis_url, last_id="0")
    assert events.read(count=10)  # the events stream moved with the slot
    queue.close()
