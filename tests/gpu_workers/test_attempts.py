"""A GPU worker's attempt records: its GPU and VRAM beside each attempt, and
a finish Redis refused recorded as lost (in the VRAM record too)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from gpu_workers.attempts import job_attempts
from gpu_workers.exceptions import OOM_REASON
from gpu_workers.fleet import Fleet
from gpu_workers.keys import BullpenKeys
from queues import Queue
from queues.attempts import parse_attempts
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers test handlers
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until

GiB = 2**30


@pytest.fixture
def worker(redis_url: str, qname: str) -> Iterator[WorkerThread]:
    """One GpuWorker on simulated GPU SIM-t-0, drained at teardown."""
    w = WorkerThread(make_spec(redis_url, qname))
    yield w
    if w.alive:
        w.stop()


def _records(r: redis.Redis, qname: str, job_id: str) -> list[dict[str, Any]]:
    key = BullpenKeys().attempts("bull", qname, job_id)
    return parse_attempts(r.lrange(key, 0, -1))


def test_gpu_attempts_record_their_gpu_and_errors(
    q: Queue, r: redis.Redis, worker: WorkerThread
) -> None:
    """An OOM retried once then failed: two records naming the GPU, the
    host, the declared VRAM and the OOM reason."""
    job = q.add(
        "test.overalloc",
        {"vram": "1GiB", "alloc": "100GiB"},
        attempts=2,
        backoff={"type": "fixed", "delay": 20},
    )
    wait_until(lambda: len(_records(r, q.name, job.id)) == 2, what="two records")
    first, last = _records(r, q.name, job.id)
    assert (first["outcome"], last["outcome"]) == ("retried", "failed")
    for rec in (first, last):
        assert rec["gpu"] == "SIM-t-0" and rec["simulated"] is True
        assert rec["host"] == "t" and rec["declared_bytes"] == GiB
        assert rec["error"] == OOM_REASON
        assert rec["worker"] == worker.spec.worker_id
    assert first["delay_ms"] == 20


def test_refused_finish_is_lost_not_completed(
    q: Queue, r: redis.Redis, fleet: Fleet, worker: WorkerThread
) -> None:
    """Another worker took the job's lock while it ran: its completion is
    refused (code -6), and both the attempt and the VRAM record say lost."""
    job = q.add("test.sleep", {"s": 0.5, "vram": "1GiB"})
    wait_until(lambda: q.get_job_state(job.id).value == "active", what="the start")
    r.set(q.keys.lock(job.id), "another-worker-token")
    wait_until(lambda: len(_records(r, q.name, job.id)) == 1, what="the record")
    (rec,) = _records(r, q.name, job.id)
    assert (rec["outcome"], rec["intended"], rec["code"]) == ("lost", "completed", -6)
    assert rec["gpu"] == "SIM-t-0"
    vram = wait_until(
        lambda: (
            (v := fleet.job_vram(q.name, job.id)) and v["outcome"] != "completed" and v
        ),
        what="the corrected VRAM record",
    )
    assert vram["outcome"] == "lost (finish refused, code -6)"
    found, state = q.get_job_with_state(job.id)
    assert found is not None
    (row,) = job_attempts(fleet, "bull", q.name, found, state.value).rows
    assert row["error"] == (
        f"not saved: job {job.id} is locked by another worker (code -6); "
        "the worker's outcome was completed"
    )
