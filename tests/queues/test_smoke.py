"""End-to-end: add jobs, process them with a worker, read them back."""

from __future__ import annotations

import asyncio

from queues import AsyncQueue, AsyncWorker, Queue


def test_add_and_process(redis_url: str, qname: str) -> None:
    """Jobs added to a queue are completed by an async worker, with return values."""
    q = Queue(qname, redis_url)
    jobs = q.add_bulk([{"name": "sq", "data": {"x": i}} for i in range(20)])
    assert [j.id for j in jobs] == [str(i) for i in range(1, 21)]

    async def main() -> None:
        async def proc(job):  # type: ignore[no-untyped-def]
            return job.data["x"] ** 2

        w = AsyncWorker(qname, proc, connection=redis_url, concurrency=5)
        task = asyncio.create_task(w.run(install_signals=False))
        aq = AsyncQueue(qname, redis_url)
        for _ in range(200):
            if (await aq.get_counts("completed"))["completed"] == 20:
                break
            await asyncio.sleep(0.02)
        w.close()
        await task
        await aq.close()

    asyncio.run(main())
    assert q.get_counts("completed", "waiting", "active") == {
        "completed": 20,
        "waiting": 0,
        "active": 0,
    }
    job = q.get_job("3")
    assert job is not None and job.returnvalue == 4 and job.attempts_made == 1
