"""A processor that raises MoveToWait gives its job back untouched: to the
front of the line, its attempts not counted, no failure reported; the job
then runs again and completes (queues/worker/finishing.py `give_back`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from queues import AsyncWorker, Job, MoveToWait, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import WorkerThread, worker_thread
from tests.queues.worker.test_attempt_history import _records


class GiveBackOnce:
    """Gives back each job named in `ids` the first time it runs, raising
    what `why(job)` makes (MoveToWait by default); records every run (id,
    attempts_made, attempts_started)."""

    def __init__(
        self, ids: set[str], why: Callable[[Job], MoveToWait] | None = None
    ) -> None:
        self.ids = ids
        self.why = why or (lambda job: MoveToWait("no room on this GPU right now"))
        self.runs: list[tuple[str, int, int]] = []
        self.lock = threading.Lock()

    def __call__(self, job: Job) -> Any:
        with self.lock:
            first = job.id in self.ids
            self.ids.discard(job.id)
            self.runs.append((job.id, job.attempts_made, job.attempts_started))
        if first:
            raise self.why(job)
        return job.id


def run_three_giving_back_job_1(
    redis_url: str, q: Queue, proc: GiveBackOnce
) -> WorkerThread:
    """Jobs 1, 2, 3 at concurrency 1, `proc` giving job 1 back once: it runs
    again before 2 and 3, then completes with one attempt made (the
    give-back not counted, its start is: ats 2), no `failed` listener call.
    Returns the (stopped) worker."""
    for n in range(3):
        q.add("j", {"n": n}, attempts=1)
    failed: list[str] = []
    with worker_thread(q.name, proc, redis_url) as w:
        w.worker.on("failed", lambda job, err: failed.append(job.id))
        wait_until(lambda: q.get_counts("completed")["completed"] == 3, 10)
    assert [run[0] for run in proc.runs] == ["1", "1", "2", "3"]
    assert proc.runs[:2] == [("1", 0, 1), ("1", 0, 2)]
    job = q.get_job("1")
    assert (job.attempts_made, job.attempts_started) == (1, 2)
    assert job.returnvalue == "1" and job.failed_reason is None
    assert failed == []
    return w


def _waiting_events(r: redis.Redis, q: Queue, job_id: str) -> list[str]:
    return [
        f.get("prev", "")
        for _, f in r.xrange(q.keys.events)
        if f.get("event") == "waiting" and f.get("jobId") == job_id
    ]


def test_a_given_back_job_runs_next_and_completes_uncounted(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """At concurrency 1, jobs 1, 2, 3 waiting: job 1 given back runs again
    before 2 and 3, then completes with one attempt made (the give-back not
    counted, its start is: ats 2); no `failed` listener call, one `waiting`
    event from active, and the worker counts it as returned."""
    w = run_three_giving_back_job_1(redis_url, q, GiveBackOnce({"1"}))
    assert _waiting_events(r, q, "1") == ["", "active"]
    assert w.worker.telemetry.counters["jobs_returned"] == 1
    assert w.worker.telemetry.counters["jobs_failed"] == 0

    # Its history: the given-back attempt (why, as its error), then the one
    # that completed; as many records as starts (none "without a record").
    def both() -> Any:
        records = _records(r, q, "1")
        return records if len(records) == 2 else None

    records = wait_until(both, what="two attempt records")
    assert [(a["attempt"], a["outcome"]) for a in records] == [
        (1, "returned"),
        (2, "completed"),
    ]
    assert records[0]["error"] == "no room on this GPU right now"


def test_an_async_worker_gives_back_many_at_concurrency(
    redis_url: str, q: Queue
) -> None:
    """20 jobs, every even one given back once, at concurrency 5: every job
    completes with one attempt made, none lost, none failed."""
    q.add_bulk([{"name": "j", "data": {"n": n}} for n in range(20)])
    proc = GiveBackOnce({str(n) for n in range(2, 21, 2)})

    async def processor(job: Job) -> Any:
        await asyncio.sleep(0.005)
        return proc(job)

    async def main() -> AsyncWorker:
        worker = AsyncWorker(q.name, processor, connection=redis_url, concurrency=5)
        task = asyncio.create_task(worker.run(install_signals=False))
        deadline = time.monotonic() + 15
        try:
            while q.get_counts("completed")["completed"] < 20:
                assert time.monotonic() < deadline, q.get_counts()
                assert not task.done(), task
                await asyncio.sleep(0.02)
        finally:
            worker.close()
            await asyncio.wait_for(task, 10)
        return worker

    worker = asyncio.run(main())
    assert q.get_counts("completed", "failed", "active", "waiting") == {
        "completed": 20,
        "failed": 0,
        "active": 0,
        "waiting": 0,
    }
    assert all(q.get_job(str(n)).attempts_made == 1 for n in range(1, 21))
    assert sorted((run[0] for run in proc.runs), key=int) == sorted(
        [str(n) for n in range(1, 21)] + [str(n) for n in range(2, 21, 2)], key=int
    )
    assert worker.telemetry.counters["jobs_returned"] == 10


def test_a_grouped_job_given_back_keeps_its_place_in_its_group(
    redis_url: str, q: Queue
) -> None:
    """Group a capped at one running job: its first job given back runs again
    before its second (the front of its group), and the cap's running count
    is released by the give-back (else the group would stay stuck at its cap)."""
    q.set_group("a", concurrency=1)
    for n in range(3):
        q.add("j", {"n": n}, group="a")
    proc = GiveBackOnce({"1"})
    with worker_thread(q.name, proc, redis_url, concurrency=3):
        wait_until(lambda: q.get_counts("completed")["completed"] == 3, 10)
    assert [run[0] for run in proc.runs] == ["1", "1", "2", "3"]
    assert q.get_group("a").active == 0
