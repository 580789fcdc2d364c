"""Crash safety: a worker process killed with SIGKILL mid-job. Its job's lock
expires, the stalled check returns the job to wait, and another worker
completes it; a job that stalls more than max_stalled_count times fails.
Nothing is lost and nothing is left in `active`."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import redis

from queues import Job, JobState, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import (
    WorkerProcess,
    counts,
    now_ms,
    terminate_all,
    wait_ready,
    worker_thread,
)

#: Small lock and stalled-check timings so a stall is noticed within ~2-3 s.
FAST = {"lock_duration": 1000, "stalled_interval": 1000}


def _kill_when_running(
    r: redis.Redis, qname: str, worker: WorkerProcess, job_id: str, times: int
) -> None:
    """SIGKILL `worker` once it has started `job_id` for the `times`-th time."""
    wait_until(
        lambda: counts(r, qname, "starts").get(job_id, 0) >= times,
        15,
        0.02,
        what=f"job {job_id} to start (#{times}) in process {worker.pid}",
    )
    worker.signal(signal.SIGKILL)
    assert worker.wait(5) == -signal.SIGKILL


def test_killed_worker_job_is_completed_by_another(
    redis_url: str, q: Queue, r: redis.Redis, spawn: Callable[..., WorkerProcess]
) -> None:
    """The killed worker's job stays active until its lock expires, then the
    stalled check returns it to wait and another worker completes it, with
    the jobs queued behind it."""
    jobs = q.add_bulk([{"name": "j", "data": i} for i in range(5)])
    victim = spawn(hang=True, concurrency=1, **FAST)
    wait_ready(r, q.name, [victim])
    _kill_when_running(r, q.name, victim, jobs[0].id, 1)
    assert q.get_job_state(jobs[0].id) is JobState.ACTIVE  # orphaned
    lock_ttl = r.pttl(q.keys.lock(jobs[0].id))
    assert 0 < lock_ttl <= FAST["lock_duration"]
    lock_expires = now_ms() + lock_ttl

    done: list[str] = []

    def processor(job: Job) -> Any:
        done.append(job.id)
        return "rescued"

    with worker_thread(q.name, processor, redis_url, **FAST):
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 5,
            10,
            0.02,
            what="the orphaned job and the rest to complete",
        )
    first = q.get_job(jobs[0].id)
    assert first.returnvalue == "rescued"
    assert first.stalled_counter == 1
    assert first.attempts_started == 2
    assert first.processed_on >= lock_expires - 5  # not taken while still locked
    assert sorted(done, key=int) == [j.id for j in jobs]
    assert q.get_counts("active", "waiting", "failed", "delayed") == {
        "active": 0,
        "waiting": 0,
        "failed": 0,
        "delayed": 0,
    }
    events = [f for _, f in r.xrange(q.keys.events)]
    assert {"event": "stalled", "jobId": jobs[0].id} in events


def test_job_stalling_twice_fails(
    redis_url: str, q: Queue, r: redis.Redis, spawn: Callable[..., WorkerProcess]
) -> None:
    """max_stalled_count=1: the second stall marks the job, and the next
    worker fails it with "job stalled more than allowable limit"."""
    job = q.add("doomed", None, attempts=3)
    for attempt in (1, 2):
        victim = spawn(hang=True, concurrency=1, max_stalled_count=1, **FAST)
        wait_ready(r, q.name, [victim])
        _kill_when_running(r, q.name, victim, job.id, attempt)
    other = q.add("fine", None)

    ran: list[str] = []

    def processor(job: Job) -> Any:
        ran.append(job.id)

    with worker_thread(q.name, processor, redis_url, max_stalled_count=1, **FAST):
        wait_until(
            lambda: q.get_counts("failed")["failed"] == 1,
            10,
            0.02,
            what="the job to fail",
        )
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 1,
            10,
            0.02,
            what="the other job to complete",
        )
    failed = q.get_job(job.id)
    assert failed.failed_reason == "job stalled more than allowable limit"
    assert failed.stalled_counter == 2
    assert failed.deferred_failure is None
    assert ran == [other.id]  # the processor never ran the doomed job again
    assert q.get_counts("active", "waiting", "delayed") == {
        "active": 0,
        "waiting": 0,
        "delayed": 0,
    }
    assert counts(r, q.name, "done") == {}


def test_long_job_keeps_its_lock(
    redis_url: str, q: Queue, r: redis.Redis, spawn: Callable[..., WorkerProcess]
) -> None:
    """A job running three times its lock_duration on a live worker is never
    taken for stalled, with another worker checking all along."""
    workers = [spawn(concurrency=2, **FAST) for _ in range(2)]
    wait_ready(r, q.name, workers)
    long_job = q.add("long", {"sleep_ms": 3000})
    q.add_bulk([{"name": "short", "data": {"sleep_ms": 50}} for _ in range(20)])
    wait_until(
        lambda: q.get_counts("completed")["completed"] == 21,
        15,
        0.05,
        what="the long job and the short ones",
    )
    assert terminate_all(workers) == [0, 0]
    job = q.get_job(long_job.id)
    assert (job.stalled_counter, job.attempts_started) == (0, 1)
    assert set(counts(r, q.name, "starts").values()) == {1}
    assert len(counts(r, q.name, "done")) == 21
