"""A worker of concurrency above 1 keeps up to two finish calls in flight
(queues/worker/core.py, SAVES_IN_FLIGHT), so the jobs one fetched run while
the other is in Redis: every job still runs once and is saved once, lock
tokens stay unique across the calls in flight, no call claims more than
half the worker's room, and at no time more jobs are held than its
concurrency."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import redis

from queues import AsyncWorker, Queue
from queues.worker.core import SAVES_IN_FLIGHT

JOBS = 400
CONCURRENCY = 10


def test_finish_calls_overlap_without_losing_or_doubling_a_job(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    q = Queue(qname, redis_url)
    q.add_bulk([{"name": "n", "data": {"i": i}} for i in range(JOBS)])
    seen: dict[str, str] = {}
    runs: list[int] = []
    in_flight, most_in_flight, fetches, held = [0], [0], [], [0]

    async def main() -> None:
        done = asyncio.Event()

        async def proc(job: Any) -> None:
            runs.append(job.data["i"])
            seen[job.id] = job.token
            held[0] = max(held[0], len(worker.running_jobs) + worker._fetching)
            if len(runs) == JOBS:
                done.set()

        worker = AsyncWorker(qname, proc, connection=redis_url, concurrency=CONCURRENCY)
        save = worker._finisher.save

        async def counted(opts: str, entries: Any = None) -> Any:
            fetches.append(json.loads(opts)["fetch"])
            in_flight[0] += 1
            most_in_flight[0] = max(most_in_flight[0], in_flight[0])
            try:
                return await save(opts, entries)
            finally:
                in_flight[0] -= 1

        worker._finisher.save = counted  # type: ignore[method-assign]
        task = asyncio.create_task(worker.run(install_signals=False))
        await asyncio.wait_for(done.wait(), 60)
        worker.close()
        await asyncio.wait_for(task, 30)

    try:
        asyncio.run(main())
        assert sorted(runs) == list(range(JOBS))
        assert len(set(seen.values())) == JOBS  # one token per job
        assert r.zcard(q.keys.completed) == JOBS and r.llen(q.keys.active) == 0
        assert 1 <= most_in_flight[0] <= SAVES_IN_FLIGHT
        assert max(fetches) <= CONCURRENCY // 2
        assert held[0] <= CONCURRENCY
    finally:
        q.close()
