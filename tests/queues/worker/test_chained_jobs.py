"""A worker of concurrency 1 chains its jobs (queues/worker/processing.py,
JobRunner.chain): a job's task saves the job's end, claims the next job in
the same call and runs it, so the jobs claimed that way share one task, and
closing, a forced close and a processor's own CancelledError behave as with
a task per job."""

from __future__ import annotations

import asyncio
from typing import Any

from queues import AsyncWorker, Job, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import close_forced, start_worker_thread


def test_jobs_claimed_by_a_jobs_end_run_in_its_task(
    redis_url: str, q: Queue, qname: str
) -> None:
    """Five jobs waiting for a worker of concurrency 1: the loop claims the
    first, each end claims the next, and all five run in one task, one after
    the other, each completed once; at concurrency 2 each job has its own."""
    # (Task names are unique in a process; a finished task's id() may be reused.)
    tasks: dict[str, list[str]] = {"1": [], "2": []}

    def processor_for(concurrency: str) -> Any:
        async def processor(job: Job) -> Any:
            task = asyncio.current_task()
            assert task is not None
            tasks[concurrency].append(task.get_name())
            await asyncio.sleep(0.01)
            return job.data

        return processor

    ids = [q.add("j", i).id for i in range(5)]
    handle = start_worker_thread(qname, processor_for("1"), redis_url)
    wait_until(lambda: q.get_counts("completed")["completed"] == 5, 15, what="5 jobs")
    handle.stop()
    assert len(tasks["1"]) == 5 and len(set(tasks["1"])) == 1
    assert [q.get_job(i).returnvalue for i in ids] == list(range(5))

    other = Queue(qname + "-2", redis_url)
    for i in range(4):
        other.add("j", i)
    handle = start_worker_thread(
        qname + "-2", processor_for("2"), redis_url, concurrency=2
    )
    wait_until(
        lambda: other.get_counts("completed")["completed"] == 4, 15, what="4 jobs"
    )
    handle.stop()
    other.close()
    assert len(set(tasks["2"])) == 4


def test_close_during_a_chain_finishes_the_job_and_claims_no_more(
    redis_url: str, q: Queue, qname: str
) -> None:
    """close() while the second of ten chained jobs runs: that job ends and
    is saved (by the close's drain), no other job is claimed, run() returns."""
    started: list[int] = []

    async def processor(job: Job) -> Any:
        started.append(job.data)
        await asyncio.sleep(0.3)

    for i in range(10):
        q.add("j", i)
    handle = start_worker_thread(qname, processor, redis_url)
    wait_until(lambda: len(started) == 2, 15, what="the second job to start")
    handle.stop()
    assert started == [0, 1]
    assert q.get_counts("completed", "active", "waiting") == {
        "completed": 2,
        "active": 0,
        "waiting": 8,
    }


def test_a_forced_close_leaves_a_chained_job_to_the_stalled_check(
    redis_url: str, q: Queue, qname: str
) -> None:
    """close(force=True) while a chained job hangs: run() returns without
    waiting for it; the job stays in active (abandoned), the one before it
    completed."""

    async def processor(job: Job) -> Any:
        await asyncio.sleep(job.data)

    q.add("quick", 0)
    q.add("hang", 30)
    handle = start_worker_thread(qname, processor, redis_url)
    wait_until(
        lambda: q.get_counts("active", "completed") == {"active": 1, "completed": 1},
        15,
        what="the quick job done and the hanging one running",
    )
    assert close_forced(handle) < 15  # (not the 30 s job)
    assert handle.worker.abandoned == 1
    assert q.get_counts("active", "completed") == {"active": 1, "completed": 1}


def test_a_processors_own_cancelled_error_ends_only_its_job(
    redis_url: str, q: Queue, qname: str
) -> None:
    """A processor that raises CancelledError itself ends its job's task (the
    job is left in active for the stalled check, as with a task per job); the
    worker goes on with the next job."""

    async def processor(job: Job) -> Any:
        if job.name == "cancels":
            raise asyncio.CancelledError
        return "ok"

    q.add("first", None)
    q.add("cancels", None)
    after = q.add("after", None)
    handle = start_worker_thread(qname, processor, redis_url)
    wait_until(lambda: q.get_counts("completed")["completed"] == 2, 15, what="two jobs")
    handle.stop()
    assert q.get_job(after.id).returnvalue == "ok"
    assert q.get_counts("active")["active"] == 1


def test_a_job_claimed_by_a_chain_call_that_failed_after_its_claim_runs(
    redis_url: str, q: Queue, qname: str
) -> None:
    """A chain call whose claim had been taken (the job moved to active and
    handed to the task) when something after it raised: the job still runs
    (it was left handed over and never run, its lock renewed for ever)."""
    done: list[str] = []

    async def processor(job: Job) -> Any:
        done.append(job.name)

    async def scenario() -> None:
        worker = AsyncWorker(qname, processor, connection=redis_url)
        take = worker._claimer.take
        calls: list[int] = []

        def take_then_fail(*answer: Any, **how: Any) -> None:
            take(*answer, **how)
            calls.append(1)
            if len(calls) == 2:  # (1: the loop's first claim; 2: a chain's)
                raise RuntimeError("after the claim")

        worker._claimer.take = take_then_fail  # type: ignore[method-assign]
        running = asyncio.create_task(worker.run(install_signals=False))
        async with asyncio.timeout(15):
            while len(done) < 3:
                await asyncio.sleep(0.02)
        worker.close()
        await asyncio.wait_for(running, 15)

    for name in ("a", "b", "c"):
        q.add(name, None)
    asyncio.run(scenario())
    assert done == ["a", "b", "c"]
    assert q.get_counts("completed", "active") == {"completed": 3, "active": 0}
