"""Blocking stream reads (queues/streamreads.py) on one server: a wake is
never lost to timing, whether it comes before the read is sent or reaches
the server before the read it is meant for."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from queues.connection import async_from_url
from queues.streamreads import BlockingReads

#: The reads' BLOCK: a read that returns well inside it was woken.
BLOCK_S = 10.0


def _streams() -> dict[str, str]:
    return {"bull:quiet:events": "0-0"}


async def _xread(client: Any, ids: dict[str, str]) -> Any:
    return await client.xread(ids, block=int(BLOCK_S * 1000))


def test_a_wake_before_the_read_makes_it_return_at_once(redis_url: str) -> None:
    """wake() with no read in flight (the caller's streams changed just
    before it read): the next read returns at once, not after its BLOCK;
    the one after it blocks again."""

    async def test() -> None:
        side = async_from_url(redis_url, decode_responses=True)
        reads = BlockingReads(redis_url, side, BLOCK_S)
        try:
            await reads.wake()
            started = time.monotonic()
            (group,) = await reads.read(_streams(), _xread)
            assert group.error is None and group.reply == []
            assert time.monotonic() - started < BLOCK_S / 2
            again = asyncio.create_task(reads.read(_streams(), _xread))
            await asyncio.sleep(0.5)
            assert not again.done()  # blocking: the wake was used up
            again.cancel()
        finally:
            await reads.close()
            await side.aclose()

    asyncio.run(test())


def test_an_unblock_that_arrives_before_its_read_is_sent_again(
    redis_url: str,
) -> None:
    """A read whose XREAD reaches the server after the wake's CLIENT UNBLOCK
    (held back here for 0.3 s, as a busy machine may): the UNBLOCK, answered
    "not blocked", is sent again until it takes, so the read returns well
    inside its BLOCK."""
    sent = asyncio.Event()

    async def late_xread(client: Any, ids: dict[str, str]) -> Any:
        await asyncio.sleep(0.3)
        sent.set()
        return await _xread(client, ids)

    async def test() -> None:
        side = async_from_url(redis_url, decode_responses=True)
        reads = BlockingReads(redis_url, side, BLOCK_S)
        try:
            started = time.monotonic()
            task = asyncio.create_task(reads.read(_streams(), late_xread))
            while not any(c.blocked for c in reads._conns.values()):
                await asyncio.sleep(0.01)
            assert not sent.is_set()
            await reads.wake()  # returns once the read has been unblocked
            (group,) = await asyncio.wait_for(task, BLOCK_S * 2)
            assert sent.is_set() and group.error is None and group.reply == []
            assert time.monotonic() - started < BLOCK_S / 2
        finally:
            await reads.close()
            await side.aclose()

    asyncio.run(test())
