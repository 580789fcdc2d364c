"""Helpers of the groups tests: a worker running beside the test's code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from queues import AsyncQueue, AsyncWorker, Job


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
