"""QueueEvents: typed events from the stream, from an id or only new ones."""

from __future__ import annotations

import asyncio

from queues import AsyncQueueEvents, AsyncWorker, Queue, QueueEvents
from queues.exceptions import UnrecoverableError


def _run_worker(redis_url: str, qname: str, expected: int) -> None:
    async def proc(job):  # type: ignore[no-untyped-def]
        await job.update_progress(50)
        await job.update_progress({"step": 2, "of": 3})
        if job.name == "bad":
            raise UnrecoverableError("bad input: 'x' & <y>")
        return {"ok": job.data}

    async def main() -> None:
        w = AsyncWorker(qname, proc, connection=redis_url)
        task = asyncio.create_task(w.run(install_signals=False))
        q = Queue(qname, redis_url)
        for _ in range(300):
            c = q.get_counts("completed", "failed")
            if c["completed"] + c["failed"] >= expected:
                break
            await asyncio.sleep(0.01)
        w.close()
        await task

    asyncio.run(main())


def test_events_from_start_are_typed(redis_url: str, qname: str) -> None:
    """Reading from 0 yields added/waiting/active/progress/completed/failed in order,
    with progress data and return values parsed and failedReason as raw text."""
    q = Queue(qname, redis_url)
    q.add("good", 7)
    q.add("bad", None)
    q.add("later", {}, delay=5000)
    _run_worker(redis_url, qname, 2)
    ev = QueueEvents(qname, redis_url, last_id="0", block_ms=100)
    events = ev.read(count=1000)
    names = [(e.event, e.job_id) for e in events]
    assert names[:4] == [
        ("added", "1"),
        ("waiting", "1"),
        ("added", "2"),
        ("waiting", "2"),
    ]
    assert ("delayed", "3") in names
    delayed = next(e for e in events if e.event == "delayed")
    assert isinstance(delayed.fields["delay"], int) and delayed.fields["delay"] > 0
    progress = [
        e.fields["data"] for e in events if e.event == "progress" and e.job_id == "1"
    ]
    assert progress == [50, {"step": 2, "of": 3}]
    done = next(e for e in events if e.event == "completed")
    assert done.job_id == "1" and done.fields["returnvalue"] == {"ok": 7}
    assert done.fields["prev"] == "active"
    failed = next(e for e in events if e.event == "failed")
    assert (
        failed.job_id == "2" and failed.fields["failedReason"] == "bad input: 'x' & <y>"
    )
    assert [e.event for e in events].index("active") < [e.event for e in events].index(
        "completed"
    )
    assert ev.last_id == events[-1].id
    assert ev.read(block_ms=50) == []
    ev.close()


def test_dollar_means_only_new_events(redis_url: str, qname: str) -> None:
    """Starting at "$" skips history and sees each later event exactly once."""
    q = Queue(qname, redis_url)
    q.add("old", {})

    async def main() -> list[str]:
        ev = AsyncQueueEvents(qname, redis_url, block_ms=200)
        first = await ev.read()
        assert first == []
        q.add("new", {})
        got = [e.event for e in await ev.read()]
        got += [e.event for e in await ev.read(block_ms=50)]
        await ev.close()
        return got

    assert asyncio.run(main()) == ["added", "waiting"]


def test_an_idle_stream_blocks_for_the_whole_block_not_the_read_timeout(
    redis_url: str, qname: str
) -> None:
    """A read on a stream that stays quiet returns [] after block_ms, though
    the connection's read timeout is shorter (redis-py 8 reads with 5 s by
    default, and XREAD BLOCK 10000 is the default here): the reader's
    connection outwaits its block, sync and asyncio, also for a longer block
    asked for one read; iterating (which names the connection) works after.
    Any URL: tests/cluster re-runs it on a cluster client."""
    import time

    from queues.connection import async_from_url, sync_from_url

    queue = Queue(qname, redis_url)
    queue.add("x", {})
    short = sync_from_url(redis_url, socket_timeout=0.3)
    events = QueueEvents(qname, short, block_ms=600)
    started = time.monotonic()
    assert events.read() == []
    assert events.read(block_ms=900) == []
    # Both blocks were waited out, and not the 10 s default block.
    assert 1.4 < time.monotonic() - started < 10
    queue.add("y", {})
    assert next(iter(events)).event == "added"
    events.close()
    queue.close()

    async def main() -> None:
        short = async_from_url(redis_url, socket_timeout=0.3)
        events = AsyncQueueEvents(qname, short, block_ms=600)
        started = time.monotonic()
        assert await events.read() == []
        assert 0.5 < time.monotonic() - started < 10
        await events.close()
        await short.aclose()

    asyncio.run(main())
    short.close()


def test_for_blocking_keeps_a_long_enough_timeout_and_extends_a_short_one(
    redis_url: str,
) -> None:
    """for_blocking returns the client when its read timeout (or none)
    outlasts the block, else a sibling on the same server that does."""
    import redis
    import redis.asyncio as aioredis

    from queues.connection import for_blocking

    def timeout_of(client: object) -> object:
        kwargs = client.connection_pool.connection_kwargs  # type: ignore[attr-defined]
        return kwargs.get("socket_timeout", "library default")

    unbounded = redis.Redis.from_url(redis_url, socket_timeout=None)
    assert for_blocking(unbounded, 60) is unbounded
    long = redis.Redis.from_url(redis_url, socket_timeout=30)
    assert for_blocking(long, 10) is long
    for client in (
        redis.Redis.from_url(redis_url),  # redis-py 8's default: 5 s
        aioredis.Redis.from_url(redis_url),
    ):
        sibling = for_blocking(client, 10)
        assert sibling is not client and type(sibling) is type(client)
        assert timeout_of(sibling) == 15.0
        kwargs = sibling.connection_pool.connection_kwargs
        assert kwargs["port"] == client.connection_pool.connection_kwargs["port"]
