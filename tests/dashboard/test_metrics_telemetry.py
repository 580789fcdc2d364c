"""A GPU worker's telemetry counters (queues.telemetry) reach /metrics: its
heartbeat carries them and the collector exposes them per worker."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from gpu_workers.fleet import Fleet
from queues import JobState, Queue
from tests.dashboard.test_metrics import samples, scrape, value
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers handlers
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db


def test_worker_telemetry_counters_on_metrics(
    dashboard_redis: str, r: redis.Redis, qname: str
) -> None:
    """A real GPU worker (simulated GPU) recovers an orphaned job with its
    stalled check and completes it, completes one job and retries then fails
    another; /metrics then shows its attempts by outcome, its rate-limit hits
    and its stalled-check counts, labelled with the worker."""
    q = Queue(qname, dashboard_redis)
    orphan = q.add("test.sleep", {"s": 0.01})
    # A worker that died after claiming it: in active, no lock, a candidate.
    r.lrem(q.keys.wait, 0, orphan.id)
    r.lpush(q.keys.active, orphan.id)
    r.sadd(q.keys.stalled, orphan.id)
    r.delete(q.keys.marker)
    ok = q.add("test.sleep", {"s": 0.01})
    oom = q.add("test.cuda_oom", {}, attempts=2, backoff=1)
    thread = WorkerThread(make_spec(dashboard_redis, qname))
    try:
        wait_until(lambda: q.get_job_state(ok.id) is JobState.COMPLETED)
        wait_until(lambda: q.get_job_state(orphan.id) is JobState.COMPLETED)
        wait_until(lambda: q.get_job_state(oom.id) is JobState.FAILED)

        def beat_has_all() -> Any:
            workers = Fleet(r).list_workers()
            telemetry = workers[0].get("telemetry") if workers else None
            # After every outcome: a heartbeat written after the failure may
            # still precede the two completions (the OOM job can fail first).
            return (
                telemetry
                and telemetry.get("jobs_failed") == 1
                and telemetry.get("jobs_completed") == 2
            )

        wait_until(beat_has_all, what="a heartbeat after every outcome")
        families = scrape()
    finally:
        thread.stop()
    worker = {"worker": f"t:bull:{qname}:SIM-t-0", "queue": f"bull:{qname}"}
    attempts = families["bullpen_worker_attempts"]
    assert {
        s.labels["outcome"]: s.value
        for s in samples(attempts, **worker)
        if s.name.endswith("_total")
    } == {"started": 4, "completed": 2, "failed": 1, "retried": 1, "returned": 0}
    assert (
        value(
            families["bullpen_worker_rate_limit_hits"],
            "bullpen_worker_rate_limit_hits_total",
            **worker,
        )
        == 0
    )
    stalled = families["bullpen_worker_stalled_jobs"]
    assert (
        value(
            stalled, "bullpen_worker_stalled_jobs_total", outcome="recovered", **worker
        )
        == 1
    )
