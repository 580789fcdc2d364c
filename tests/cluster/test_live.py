"""The live path on a 3-primary Redis Cluster: a websocket following queues
whose slots sit on different primaries gets their jobs' events once each; the
events reader sends one blocking read per slot group (not per queue), and
waking a blocked read works across nodes."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User

from dashboard.channel_layers import channel_layers
from dashboard.console.live.reader import EventsReader, get_reader
from queues import AsyncQueue, Job
from queues.cluster import check_queue_slot
from queues.connection import async_from_url
from queues.streamreads import BlockingReads
from tests.api.helpers import WorkerThread
from tests.cluster.spread import names_on_different_primaries, node_of
from tests.dashboard.live_helpers import (
    drain,
    existing_queue,
    receive_until,
    run,
    session_cookie,
    subscribed,
    viewer,  # noqa: F401 - fixture
)


@pytest.fixture
def cluster_live(settings: Any, redis_url: str) -> Iterator[str]:
    """Django's Redis and channel layer as settings make them for a cluster URL."""
    settings.REDIS_URL = redis_url
    settings.CHANNEL_LAYERS = channel_layers(redis_url, "test:asgi")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    yield redis_url


async def one_step(job: Job) -> str:
    await job.update_progress(50)
    return "done"


@pytest.mark.django_db(transaction=True)
def test_socket_gets_events_of_queues_on_two_primaries_once(
    cluster_live: str,
    viewer: User,  # noqa: F811 - fixture
    r: Any,
) -> None:
    """Jobs of two queues whose slots are on different primaries: the socket
    gets each job's added, active, progress and completed exactly once, and
    the reader reads each queue on a connection to its own primary."""
    qa, qb = names_on_different_primaries(r, "ab")
    assert node_of(r, "bull", qa) != node_of(r, "bull", qb)
    keys = [f"bull:{qa}", f"bull:{qb}"]
    cookie = session_cookie(viewer)

    async def test() -> None:
        queues = [await existing_queue(name, cluster_live) for name in (qa, qb)]
        comm = await subscribed(cookie, queues=keys)
        for key in keys:
            await receive_until(
                comm, lambda m, k=key: m["type"] == "counts" and m["queue"] == k
            )
        jobs = {key: (await q.add("render", {})).id for key, q in zip(keys, queues)}
        workers = [WorkerThread(n, one_step, cluster_live) for n in (qa, qb)]
        try:
            got = await drain_until_completed(comm, set(keys))
            got += await drain(comm, 0.5)  # anything sent twice would come now
        finally:
            await asyncio.gather(*(asyncio.to_thread(w.stop) for w in workers))
        seen = Counter(
            (m["queue"], m["job"], m.get("event", m["type"]))
            for m in got
            if m["type"] in ("event", "progress")
        )
        for key, job_id in jobs.items():
            for what in ("added", "active", "progress", "completed"):
                assert seen[key, job_id, what] == 1, (key, what, seen)
        reads = get_reader()._reads
        nodes = {conn.node.name for conn in reads._conns.values()}
        assert nodes == {node_of(r, "bull", qa), node_of(r, "bull", qb)}
        for q in queues:
            await q.close()

    run(test)


async def drain_until_completed(comm: Any, keys: set[str]) -> list[dict[str, Any]]:
    """Messages until a completed event of each queue in `keys` came."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while keys - {m["queue"] for m in got if m.get("event") == "completed"}:
        assert time.monotonic() < deadline, "not every queue's job completed"
        got += await drain(comm, 0.1)
    return got


def test_reader_reads_once_per_slot_group_not_per_queue(redis_url: str) -> None:
    """Three queues under the prefix `{bull}` share one slot, so one blocking
    read; a queue under a plain prefix with its own tag needs a second: the
    reader sends two reads per round, and the events of all four arrive."""
    shared = [f"{{bull}}:render{i}" for i in range(3)]
    own = "bull:{solo}"
    routed: list[dict[str, Any]] = []

    async def test() -> None:
        reader = EventsReader(redis_url, ["{bull}", "bull"], routed.append)
        queues = [AsyncQueue(f"render{i}", redis_url, "{bull}") for i in range(3)]
        queues.append(AsyncQueue("{solo}", redis_url, "bull"))
        try:
            for key in [*shared, own]:
                await reader.follow(key)
            for q in queues:
                await q.add("a", {})
            want = set([*shared, own])
            deadline = time.monotonic() + 5
            while want - {m["queue"] for m in routed if m["type"] == "queue.events"}:
                assert time.monotonic() < deadline, routed
                await asyncio.sleep(0.02)
            reads = reader._reads
            assert len(reads.groups(q.keys.events for q in queues)) == 2
            rounds, sent = reads.rounds, reads.reads  # all four followed by now
            await asyncio.sleep(1.5)  # a round blocks at most 1 s
            assert reads.rounds > rounds
            assert reads.reads - sent == 2 * (reads.rounds - rounds)
        finally:
            await reader.stop()
            for q in queues:
                await q.close()

    asyncio.run(test())


def test_a_blocked_read_on_another_node_is_woken(redis_url: str, r: Any) -> None:
    """Reads blocking 10 s on two primaries return within a fraction of that
    when woken (CLIENT UNBLOCK reaches each connection's own node), and as
    soon as one stream gets an entry (read from 0-0, so an entry added before
    a busy machine's read arrived counts too)."""
    qa, qb = names_on_different_primaries(r, "ab")
    streams = {f"bull:{qa}:events": "0-0", f"bull:{qb}:events": "0-0"}

    async def xread(client: Any, ids: dict[str, str]) -> Any:
        return await client.xread(ids, block=10_000)

    async def test() -> None:
        side = async_from_url(redis_url, decode_responses=True)
        reads = BlockingReads(redis_url, side, 10.0)
        try:
            for late in (reads.wake, lambda: side.xadd(f"bull:{qb}:events", {"e": 1})):
                started = time.monotonic()
                task = asyncio.create_task(reads.read(streams, xread))
                await asyncio.sleep(0.2)
                await late()
                groups = await task
                # Woken, not timed out: well inside the 10 s block.
                assert time.monotonic() - started < 5.0
                assert [g.error for g in groups] == [None, None]
            assert [len(g.reply) for g in groups] == [0, 1]
            assert len({c.node.name for c in reads._conns.values()}) == 2
        finally:
            await reads.close()
            await side.aclose()

    asyncio.run(test())


def test_a_read_whose_slot_moved_reconnects_to_its_new_primary(
    redis_url: str, r: Any
) -> None:
    """A read blocked on a slot that is then given to another primary gets
    MOVED; the next read learns the slots again, connects to the new owner
    and reads the stream there. (The slot is empty when moved, and moved back.)"""
    (name,) = names_on_different_primaries(r, "m")
    stream = f"bull:{name}:events"
    slot = check_queue_slot("bull", name)
    owners: dict[str, str] = {}
    for address, info in r.cluster_nodes().items():
        if "master" in info["flags"]:
            owners[address] = info["node_id"]
    source = node_of(r, "bull", name)
    target = next(a for a in owners if a != source)

    def give_slot(to: str) -> None:
        for address in sorted(owners, key=lambda a: a != to):  # new owner first
            host, port = address.rsplit(":", 1)
            node = r.get_node(host=host, port=int(port))
            r.execute_command(
                "CLUSTER", "SETSLOT", slot, "NODE", owners[to], target_nodes=node
            )

    async def xread(client: Any, ids: dict[str, str]) -> Any:
        return await client.xread(ids, block=3000)

    async def test() -> None:
        side = async_from_url(redis_url, decode_responses=True)
        reads = BlockingReads(redis_url, side, 3.0)
        try:
            task = asyncio.create_task(reads.read({stream: "0-0"}, xread))
            await asyncio.sleep(0.2)
            await asyncio.to_thread(give_slot, target)
            (moved,) = await asyncio.wait_for(task, 2.5)
            assert isinstance(moved.error, redis.exceptions.MovedError), moved
            again_task = asyncio.create_task(reads.read({stream: "0-0"}, xread))
            await asyncio.sleep(0.3)  # blocked again, on the slot's new owner
            await asyncio.to_thread(r.xadd, stream, {"e": 1})
            (again,) = await asyncio.wait_for(again_task, 2.5)
            assert again.error is None and len(again.reply[0][1]) == 1
            (conn,) = reads._conns.values()
            assert conn.node.name == target
            await side.delete(stream)
        finally:
            await reads.close()
            await side.aclose()
            await asyncio.to_thread(give_slot, source)

    asyncio.run(test())
