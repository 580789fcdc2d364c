"""Graceful close: SIGTERM to a worker process with a running job makes it
stop fetching, finish the running job, and exit 0."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest
import redis

from queues import JobState, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import WorkerProcess, counts, now_ms, wait_ready


@pytest.mark.parametrize(
    "sync", [False, True], ids=["async-processor", "sync-processor"]
)
def test_sigterm_finishes_running_job_then_exits_zero(
    redis_url: str,
    q: Queue,
    r: redis.Redis,
    spawn: Callable[..., WorkerProcess],
    sync: bool,
) -> None:
    """The running job completes after SIGTERM, no other job (not even one
    added after the signal) starts, and the process exits 0."""
    worker = spawn(sync=sync, concurrency=1)
    wait_ready(r, q.name, [worker])
    jobs = q.add_bulk([{"name": "slow", "data": {"sleep_ms": 1200}} for _ in range(3)])
    first = jobs[0].id
    wait_until(
        lambda: counts(r, q.name, "starts").get(first),
        10,
        0.01,
        what="the first job to start",
    )
    term_at = now_ms()
    worker.signal(signal.SIGTERM)
    late = q.add("late", {"sleep_ms": 0})  # added after SIGTERM: must not start
    assert worker.wait(15) == 0, worker.log()
    exited_at = now_ms()
    done = q.get_job(first)
    assert done.get_state() is JobState.COMPLETED
    assert done.returnvalue == {"pid": worker.pid}
    assert term_at < done.finished_on <= exited_at
    assert done.finished_on - done.processed_on >= 1200
    assert counts(r, q.name, "starts") == {first: 1}
    assert counts(r, q.name, "done") == {first: 1}
    assert [q.get_job_state(j.id) for j in jobs[1:] + [late]] == [JobState.WAITING] * 3
    assert q.get_counts("active", "waiting", "completed") == {
        "active": 0,
        "waiting": 3,
        "completed": 1,
    }
    assert not r.exists(q.keys.lock(first))
    assert "worker exited cleanly" in worker.log()


def test_sigterm_with_several_running_jobs(
    redis_url: str, q: Queue, r: redis.Redis, spawn: Callable[..., WorkerProcess]
) -> None:
    """Every running job (concurrency 3) finishes before the exit."""
    worker = spawn(concurrency=3)
    wait_ready(r, q.name, [worker])
    jobs = q.add_bulk([{"name": "slow", "data": {"sleep_ms": 800}} for _ in range(5)])
    wait_until(
        lambda: len(counts(r, q.name, "starts")) == 3,
        10,
        0.01,
        what="three running jobs",
    )
    worker.signal(signal.SIGTERM)
    assert worker.wait(15) == 0, worker.log()
    assert counts(r, q.name, "done") == {j.id: 1 for j in jobs[:3]}
    assert q.get_counts("active", "waiting", "completed") == {
        "active": 0,
        "waiting": 2,
        "completed": 3,
    }


def test_idle_worker_exits_promptly_on_sigterm(
    redis_url: str, q: Queue, r: redis.Redis, spawn: Callable[..., WorkerProcess]
) -> None:
    """A worker blocked on the marker (drain_delay 30 s) exits without
    waiting out its block: well inside the 30 s (how much inside is the
    machine's speed, so the bound is half of it, not a few seconds)."""
    worker = spawn(drain_delay=30)
    wait_ready(r, q.name, [worker])
    time.sleep(0.3)  # let it block
    sent = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(15) == 0, worker.log()
    assert time.monotonic() - sent < 15
