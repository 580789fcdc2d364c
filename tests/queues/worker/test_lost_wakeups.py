"""A marker popped while its worker is not waiting for it goes back.

A worker's wait on the marker (BZPOPMIN) that a running job's end cuts
short stays pending while the worker runs, claims or has no room. If a
producer's add writes the marker then, that pending BZPOPMIN takes it and
wakes no one: the queue's other workers stay blocked on the marker until
their drain delay ends (a minute for GPU workers) while the job waits. The
worker gives such a marker back, as it was, so another waiting worker takes
the job at once (seen on a supervisor's two GPU processes under load: a
Node producer's job waited 44 s)."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis

from queues import AsyncWorker
from tests.helpers import wait_until


async def noop(job: Any) -> None:
    return None


def test_a_marker_popped_after_the_wait_was_cut_short_wakes_another_worker(
    redis_url: str, qname: str
) -> None:
    async def main() -> None:
        worker = AsyncWorker(qname, noop, connection=redis_url, drain_delay=60)
        claimer = worker._claimer  # its wait on the marker, driven by hand
        marker = worker.queue.keys.marker
        other = aioredis.from_url(redis_url)
        try:
            wake = asyncio.Event()
            waiting = asyncio.create_task(claimer.wait_for_job(wake))
            await asyncio.to_thread(
                wait_until,
                lambda: any(
                    c.get("cmd") == "bzpopmin" and "b" in c.get("flags", "")
                    for c in asyncio.run(_clients(redis_url))
                ),
                10,
                what="the worker blocked on the marker",
            )
            wake.set()  # a job of its ended: it goes to save it
            await waiting
            # A producer's add writes the marker: the worker's pending
            # BZPOPMIN takes it (it blocked first), while not waiting.
            await other.zadd(marker, {"0": 0})
            # Another worker of the queue, waiting now, must get it.
            popped = await other.bzpopmin(marker, timeout=10)
            assert popped is not None, "the marker was lost: no other worker woke"
            assert popped[1] == b"0" and popped[2] == 0
            assert claimer._block_task is None  # it blocks anew next time
        finally:
            await claimer.stop_waiting()
            await claimer.close()
            await other.aclose()
            await worker.queue.close()

    asyncio.run(main())


async def _clients(url: str) -> list[dict[str, Any]]:
    client = aioredis.from_url(url, decode_responses=True)
    try:
        return list(await client.client_list())
    finally:
        await client.aclose()
