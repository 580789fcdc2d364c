"""Plain `def` processors (run in a thread) and `async def` processors both
work, including job.update_progress() and job.log() from inside them."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio as aioredis

from queues import AsyncQueue, AsyncWorker, Job, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread


def _progress_events(r: redis.Redis, q: Queue, job_id: str) -> list[str]:
    return [
        f["data"]
        for _, f in r.xrange(q.keys.events)
        if f.get("event") == "progress" and f.get("jobId") == job_id
    ]


def test_sync_processor_progress_and_log(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """A plain def processor runs off the event loop's thread and its job's
    update_progress()/log() act at once (sync methods)."""
    threads: list[str] = []

    def processor(job: Job) -> Any:
        threads.append(threading.current_thread().name)
        assert job.update_progress(40) is not None
        assert job.log(f"first line of {job.data['n']}") == 1
        job.update_progress({"pct": 100, "stage": "done"})
        assert job.log("second line") == 2
        return {"double": job.data["n"] * 2}

    job = q.add("sync", {"n": 21})
    with worker_thread(q.name, processor, redis_url) as w:
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 1, 10, what="completion"
        )
        loop_thread = w.thread.name
    done = q.get_job(job.id)
    assert done.returnvalue == {"double": 42}
    assert done.progress == {"pct": 100, "stage": "done"}
    assert q.get_job_logs(job.id) == (["first line of 21", "second line"], 2)
    assert _progress_events(r, q, job.id) == ["40", '{"pct":100,"stage":"done"}']
    assert threads and threads[0] != loop_thread


def test_async_processor_progress_and_log(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """An async def processor awaits its job's update_progress()/log()."""

    async def processor(job: Job) -> Any:
        await job.update_progress(7)
        assert await job.log("async line 1") == 1
        await job.update_progress({"pct": 99})
        assert await job.log("async line 2") == 2
        return job.data["n"] + 1

    async def main() -> None:
        aq = AsyncQueue(q.name, redis_url)
        job = await aq.add("async", {"n": 1})
        worker = AsyncWorker(q.name, processor, connection=redis_url)
        task = asyncio.create_task(worker.run(install_signals=False))
        try:
            deadline = time.monotonic() + 10
            while (await aq.get_counts("completed"))["completed"] < 1:
                assert time.monotonic() < deadline, "job not completed in 10s"
                assert not task.done(), task
                await asyncio.sleep(0.01)
        finally:
            worker.close()
            await asyncio.wait_for(task, 10)
            await aq.close()
        done = q.get_job(job.id)
        assert done.returnvalue == 2
        assert done.progress == {"pct": 99}
        assert q.get_job_logs(job.id) == (["async line 1", "async line 2"], 2)
        assert _progress_events(r, q, job.id) == ["7", '{"pct":99}']

    asyncio.run(main())


def test_async_processor_in_blocking_worker(redis_url: str, q: Queue) -> None:
    """The blocking Worker also runs async def processors."""

    async def processor(job: Job) -> Any:
        await job.update_progress(1)
        await job.log("from Worker")
        return "ok"

    job = q.add("x", None)
    with worker_thread(q.name, processor, redis_url):
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 1, 10, what="completion"
        )
    done = q.get_job(job.id)
    assert (done.returnvalue, done.progress) == ("ok", 1)
    assert q.get_job_logs(job.id)[0] == ["from Worker"]


def test_sync_processors_run_concurrently(redis_url: str, q: Queue) -> None:
    """With concurrency 4, four blocking processors run at the same time."""
    inside = 0
    peak = 0
    lock = threading.Lock()
    gate = threading.Barrier(4, timeout=10)

    def processor(job: Job) -> Any:
        nonlocal inside, peak
        with lock:
            inside += 1
            peak = max(peak, inside)
        gate.wait()  # only passes when four run at once
        with lock:
            inside -= 1
        return job.id

    q.add_bulk([{"name": "c", "data": i} for i in range(8)])
    with worker_thread(q.name, processor, redis_url, concurrency=4):
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 8, 15, what="8 jobs"
        )
    assert peak == 4
    assert q.get_counts("failed")["failed"] == 0


def _sync_progress_job(connection: Any, redis_url: str, q: Queue) -> Job:
    """Run one job whose plain def processor reports progress; the job after."""

    def processor(job: Job) -> Any:
        job.update_progress(50)
        job.log("halfway")
        return "done"

    job = q.add("p", None)
    with worker_thread(q.name, processor, connection):
        wait_until(
            lambda: sum(q.get_counts("completed", "failed").values()) == 1,
            10,
            what="the job to finish",
        )
    return q.get_job(job.id)


def test_worker_given_a_client_from_url(redis_url: str, q: Queue) -> None:
    """A worker given an asyncio client (from a URL) runs sync processors,
    whose jobs report progress through a sync client made from it."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    done = _sync_progress_job(client, redis_url, q)
    assert (done.failed_reason, done.returnvalue, done.progress) == (None, "done", 50)
    assert q.get_job_logs(done.id) == (["halfway"], 1)


def test_worker_given_a_client_built_directly(redis_url: str, q: Queue) -> None:
    """The same with an asyncio client built from host and port."""
    url = urlsplit(redis_url)
    client = aioredis.Redis(host=url.hostname, port=url.port, decode_responses=True)
    done = _sync_progress_job(client, redis_url, q)
    assert (done.failed_reason, done.returnvalue, done.progress) == (None, "done", 50)
