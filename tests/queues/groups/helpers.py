"""Helpers of the groups tests: a worker running beside the test's code, and
the finish of claimed grouped jobs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import redis

from queues import AsyncQueue, AsyncWorker, Job, Queue
from tests.queues.transitions.helpers import entry, move_to_finished


@asynccontextmanager
async def running(
    redis_url: str,
    qname: str,
    process: Callable[[Job], Awaitable[Any]],
    concurrency: int = 1,
    drain_delay: float = 0.2,
) -> AsyncIterator[AsyncQueue]:
    """An AsyncWorker on the queue for the block's length (closed after it);
    the block gets an AsyncQueue of the same queue."""
    async with AsyncQueue(qname, redis_url) as aq:
        worker = AsyncWorker(
            qname,
            process,
            connection=redis_url,
            concurrency=concurrency,
            drain_delay=drain_delay,
        )
        run = asyncio.create_task(worker.run(install_signals=False))
        try:
            yield aq
        finally:
            worker.close()
            await asyncio.wait_for(run, 10)


async def completed(aq: AsyncQueue, n: int, timeout: float = 20) -> None:
    """Until `n` jobs of the queue completed (bounded)."""
    async with asyncio.timeout(timeout):
        while (await aq.get_counts("completed"))["completed"] < n:
            await asyncio.sleep(0.02)


def finish_grouped(q: Queue, taken: list[tuple[str, str, dict[str, str]]]) -> None:
    """Complete claimed grouped jobs (claimed()'s triples) in one finish call,
    each entry naming its group as a worker's does."""
    entries = []
    for jid, token, h in taken:
        e = entry(jid, token=token)
        e["gid"] = h["gid"]
        entries.append(e)
    assert move_to_finished(q, entries)[0] == [0] * len(entries)


def server_ms(r: redis.Redis) -> int:
    """Redis's clock in ms."""
    seconds, micros = r.time()
    return seconds * 1000 + micros // 1000
