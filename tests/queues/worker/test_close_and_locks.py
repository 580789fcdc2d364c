"""Closing a worker: finished jobs keep their locks until saved, close(force)
stops at once, and pools hold a connection for every job that may run."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from queues import Job, Queue, Worker
from tests.helpers import wait_until
from tests.queues.worker.helpers import (
    WorkerThread,
    close_forced,
    start_worker_thread,
    worker_thread,
)


def test_a_finished_job_keeps_its_lock_until_saved(
    redis_url: str, q: Queue, qname: str
) -> None:
    """close() while a short and a long job run (lock 1 s): the short one
    finishes at once but is saved only when the long one ends, 2.5 s later.
    Its lock is renewed meanwhile, so the stalled check does not move it back
    to wait, and it completes once."""
    starts: dict[str, int] = {}
    lock = threading.Lock()

    async def processor(job: Job) -> Any:
        with lock:
            starts[job.name] = starts.get(job.name, 0) + 1
        await asyncio.sleep(job.data)
        return job.name

    short = q.add("short", 0.2)
    long = q.add("long", 2.5)
    handle = start_worker_thread(
        qname,
        processor,
        redis_url,
        concurrency=2,
        lock_duration=1000,
        stalled_interval=300,
    )
    wait_until(lambda: len(starts) == 2, 10, what="both jobs to start")
    handle.stop(timeout=15)
    assert q.get_job(short.id).returnvalue == "short"
    assert q.get_job(long.id).returnvalue == "long"
    assert q.get_job(short.id).stalled_counter == 0
    assert starts == {"short": 1, "long": 1}


@pytest.mark.parametrize("blocking", [False, True])
def test_close_force_stops_at_once(
    redis_url: str, q: Queue, qname: str, blocking: bool
) -> None:
    """close(force=True) returns from run() at once, leaving running jobs
    in active for the stalled check (as BullMQ's worker.close(true)); the
    jobs that had finished are saved."""

    async def async_processor(job: Job) -> Any:
        await asyncio.sleep(job.data)

    def sync_processor(job: Job) -> Any:
        time.sleep(job.data)

    processor = sync_processor if blocking else async_processor
    q.add_bulk(
        [{"name": "hang", "data": 30} for _ in range(2)]
        + [{"name": "quick", "data": 0}]
    )
    handle = WorkerThread(Worker(qname, processor, connection=redis_url, concurrency=3))
    handle.thread.start()
    wait_until(
        lambda: q.get_counts("active", "completed") == {"active": 2, "completed": 1},
        10,
        what="two hanging jobs and one completed",
    )
    # Without waiting for the 30 s jobs (the bound is half of that: how fast
    # it returns is the machine's speed).
    assert close_forced(handle) < 15
    assert handle.worker.abandoned == 2
    assert q.get_counts("active", "completed") == {"active": 2, "completed": 1}


@pytest.mark.parametrize("blocking", [False, True])
def test_concurrency_300_does_not_run_out_of_connections(
    redis_url: str, q: Queue, qname: str, blocking: bool
) -> None:
    """300 jobs at concurrency 300, each reporting progress and a log line
    at the same moment: all complete (redis-py pools stop at 100 connections
    unless sized)."""
    barrier = threading.Barrier(300, timeout=20)

    async def async_processor(job: Job) -> Any:
        await asyncio.sleep(0.3)
        await job.update_progress(50)
        await job.log("half way")
        return 1

    def sync_processor(job: Job) -> Any:
        barrier.wait()
        job.update_progress(50)
        job.log("half way")
        return 1

    processor = sync_processor if blocking else async_processor
    q.add_bulk([{"name": "j", "data": i} for i in range(300)])
    with worker_thread(qname, processor, redis_url, concurrency=300):
        wait_until(
            lambda: sum(q.get_counts("completed", "failed").values()) == 300,
            30,
            0.05,
            what="every job to end",
        )
    assert q.get_counts("completed", "failed") == {"completed": 300, "failed": 0}
