"""Four worker processes on one queue with 5,000 jobs: every job completes
exactly once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from queues import Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import (
    WorkerProcess,
    counts,
    started,
    terminate_all,
    wait_ready,
)

JOBS = 5000


@pytest.mark.slow  # load/soak: make test runs it, make test-fast does not
def test_every_job_completes_exactly_once(
    redis_url: str, q: Queue, r: redis.Redis, spawn: Callable[..., WorkerProcess]
) -> None:
    """Each job id is counted once at start and once at end (HINCRBY in Redis),
    all 5,000 are completed with atm = ats = 1, and nothing is left active."""
    workers = [spawn(concurrency=16) for _ in range(4)]
    wait_ready(r, q.name, workers)
    ids: list[str] = []
    for chunk in range(0, JOBS, 1000):
        ids += [
            j.id
            for j in q.add_bulk(
                [{"name": "n", "data": i} for i in range(chunk, chunk + 1000)]
            )
        ]
    assert len(set(ids)) == JOBS
    wait_until(
        lambda: q.get_counts("completed")["completed"] >= JOBS,
        90,
        0.1,
        what=f"{JOBS} jobs to complete",
    )
    assert terminate_all(workers) == [0, 0, 0, 0]
    done = counts(r, q.name, "done")
    starts = counts(r, q.name, "starts")
    assert set(done) == set(ids) == set(starts)
    assert set(done.values()) == {1} and set(starts.values()) == {1}
    assert q.get_counts("completed", "active", "waiting", "failed", "delayed") == {
        "completed": JOBS,
        "active": 0,
        "waiting": 0,
        "failed": 0,
        "delayed": 0,
    }
    assert r.zcard(q.keys.completed) == JOBS
    # every process took part
    assert {e["pid"] for e in started(r, q.name)} == {w.pid for w in workers}
    # each job ran once, and its hash says so
    pipe = r.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(q.keys.job(job_id), "atm", "ats", "returnvalue")
    for atm, ats, value in pipe.execute():
        assert (atm, ats) == ("1", "1") and value.startswith('{"pid":')
