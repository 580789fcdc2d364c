"""Attempt history across languages: a job a Node BullMQ worker ran has no
Bullpen records, and its attempts are read from BullMQ's own fields; a job
that Node and Bullpen workers both tried shows Bullpen's record and counts
the Node attempt as unrecorded."""

from __future__ import annotations

from typing import Any

import redis

from gpu_workers.attempts import FROM_BULLMQ, RECORDED, job_attempts
from gpu_workers.fleet import Fleet
from queues import Queue
from tests.helpers import wait_until

from .helpers import node_worker, python_worker


def _attempts(redis_url: str, q: Queue, job_id: str) -> Any:
    fleet = Fleet(redis_url)
    try:
        job, state = q.get_job_with_state(job_id)
        assert job is not None
        return job_attempts(fleet, "bull", q.name, job, state.value)
    finally:
        fleet.close()


def test_node_worker_job_shows_attempts_known_from_bullmq(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """Three failed Node attempts and a Node retry that completed: items
    numbered from attemptsStarted, errors from the stack traces and
    failedReason, the last attempt's times; no Bullpen key is written."""
    q = Queue(qname, redis_url)
    failing = q.add("f", {"fail": "node says no"}, attempts=3)
    second = q.add("s", {"failFirst": True}, attempts=2)
    worker = node_worker(redis_url, qname, name="node")
    try:
        wait_until(lambda: len(worker.seen("done")) == 1, 20, what="Node's success")
        wait_until(lambda: len(worker.seen("failed")) == 4, 20, what="Node's failures")
    finally:
        worker.stop()
    assert r.keys("bullpen:*") == []
    got = _attempts(redis_url, q, failing.id)
    assert (got.source, got.started, got.unrecorded) == (FROM_BULLMQ, 3, 3)
    assert [a["outcome"] for a in got.rows] == ["retried", "retried", "failed"]
    assert [a["error_line"] for a in got.rows] == ["Error: node says no"] * 2 + [
        "node says no"
    ]
    job = q.get_job(failing.id)
    assert got.rows[-1]["started_ms"] == job.processed_on
    assert got.rows[-1]["ended_ms"] == job.finished_on
    got = _attempts(redis_url, q, second.id)
    assert [a["outcome"] for a in got.rows] == ["retried", "completed"]
    assert got.rows[0]["error_line"] == "Error: first attempt fails"
    assert got.rows[1]["error"] is None and got.rows[1]["duration_ms"] is not None


def test_mixed_job_keeps_bullpen_record_and_counts_node_attempt(
    redis_url: str, qname: str
) -> None:
    """Node fails the first attempt, a Bullpen worker completes the retry:
    one record (attempt 2, completed), one attempt unrecorded."""
    q = Queue(qname, redis_url)
    job = q.add("m", {"failFirst": True}, attempts=2, backoff=1500)
    worker = node_worker(redis_url, qname, name="node")
    try:
        worker.wait_for("failed", job.id)
    finally:
        worker.stop()
    with python_worker(redis_url, qname):
        wait_until(
            lambda: (
                len(_attempts(redis_url, q, job.id).rows) == 1
                and _attempts(redis_url, q, job.id).source == RECORDED
            ),
            15,
        )
    got = _attempts(redis_url, q, job.id)
    assert (got.started, got.unrecorded) == (2, 1)
    (rec,) = got.rows
    assert (rec["attempt"], rec["outcome"], rec["error"]) == (2, "completed", None)
