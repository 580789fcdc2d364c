"""Attempt history: each attempt's record, written once Redis has answered
for its end (retries, final failures, completions, a refused finish)."""

from __future__ import annotations

import time
from typing import Any

import redis

from queues import AttemptHistory, Job, Queue
from queues.attempts import parse_attempts
from queues.keys import attempts_key
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread


def _records(r: redis.Redis, q: Queue, job_id: str, ns: str = "bullpen") -> Any:
    return parse_attempts(
        r.lrange(attempts_key(ns, q.keys.prefix, q.name, job_id), 0, -1)
    )


def _fail_until(succeed_on: int) -> Any:
    seen: dict[str, int] = {}

    def process(job: Job) -> str:
        seen[job.id] = seen.get(job.id, 0) + 1
        if succeed_on and seen[job.id] >= succeed_on:
            return "ok"
        raise RuntimeError(f"boom {seen[job.id]}\nsecond line")

    return process


def test_retries_leave_one_record_per_attempt(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """Two failed attempts then a success: three records in order, with the
    error of each failure, the job's processedOn as start and this worker."""
    job = q.add("j", None, attempts=5)
    with worker_thread(q.name, _fail_until(3), redis_url, worker_name="w1"):
        wait_until(lambda: len(_records(r, q, job.id)) == 3, 10, what="3 records")
    recs = _records(r, q, job.id)
    assert [x["attempt"] for x in recs] == [1, 2, 3]
    assert [x["outcome"] for x in recs] == ["retried", "retried", "completed"]
    assert [x["error"] for x in recs] == [
        "boom 1\nsecond line",
        "boom 2\nsecond line",
        None,
    ]
    done = q.get_job(job.id)
    assert recs[-1]["started_ms"] == done.processed_on
    assert all(x["started_ms"] <= x["ended_ms"] for x in recs)
    assert recs[0]["ended_ms"] <= recs[1]["started_ms"]
    assert {x["worker"] for x in recs} == {"w1"}
    assert all(x["pid"] > 0 and x["host"] for x in recs)


def test_final_failure_and_bounds(redis_url: str, q: Queue, r: redis.Redis) -> None:
    """Attempts exhausted: the last record says failed; only the newest
    `keep` records are kept, and the list expires after `ttl_s`."""
    job = q.add("j", None, attempts=5)
    history = AttemptHistory(namespace="bp", keep=3, ttl_s=120)
    with worker_thread(q.name, _fail_until(0), redis_url, attempt_history=history):
        wait_until(
            lambda: q.get_counts("failed")["failed"] == 1, 10, what="the failure"
        )
        wait_until(
            lambda: (
                (_records(r, q, job.id, "bp") or [{}])[-1].get("outcome") == "failed"
            ),
            5,
            what="the last record",
        )
    recs = _records(r, q, job.id, "bp")
    assert [x["attempt"] for x in recs] == [3, 4, 5]
    assert [x["outcome"] for x in recs] == ["retried", "retried", "failed"]
    assert recs[-1]["error"].startswith("boom 5")
    assert 100 < r.ttl(attempts_key("bp", q.keys.prefix, q.name, job.id)) <= 120
    assert not r.exists(attempts_key("bullpen", q.keys.prefix, q.name, job.id))


def test_refused_finish_is_recorded_as_lost(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """A job whose lock another worker took while it ran: its finish is
    refused, and the record says lost with the code, not completed."""
    job = q.add("j", None)

    def process(j: Job) -> str:
        r.set(q.keys.lock(j.id), "another-worker-token")
        return "done"

    with worker_thread(q.name, process, redis_url):
        wait_until(lambda: len(_records(r, q, job.id)) == 1, 10, what="the record")
    (rec,) = _records(r, q, job.id)
    assert (rec["outcome"], rec["intended"], rec["code"]) == ("lost", "completed", -6)
    assert rec["error"] is None and rec["attempt"] == 1
    assert q.get_job(job.id).get_state().value == "active"


def test_no_history_when_turned_off(redis_url: str, q: Queue, r: redis.Redis) -> None:
    """attempt_history=None writes nothing outside the queue's keys."""
    q.add("j", None)
    with worker_thread(q.name, _fail_until(1), redis_url, attempt_history=None):
        wait_until(lambda: q.get_counts("completed")["completed"] == 1, 10)
        time.sleep(0.1)
    assert r.keys("bullpen:*") == []


def test_refused_retry_is_recorded_as_lost(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """A failed attempt whose retry Redis refuses (its lock taken): lost,
    with the hoped-for retry and the processor's error."""
    job = q.add("j", None, attempts=3)

    def process(j: Job) -> str:
        r.set(q.keys.lock(j.id), "another-worker-token")
        raise RuntimeError("gave up")

    with worker_thread(q.name, process, redis_url):
        wait_until(lambda: len(_records(r, q, job.id)) == 1, 10, what="the record")
    (rec,) = _records(r, q, job.id)
    assert (rec["outcome"], rec["intended"], rec["code"]) == ("lost", "retried", -6)
    assert (rec["error"], rec["delay_ms"]) == ("gave up", 0)


def test_records_read_in_attempt_order_whatever_the_push_order() -> None:
    """A retry's record is pushed after the retry call; the next attempt may
    have finished and pushed first (seen on a cluster): readers still get
    attempts 1, 2, 3."""
    import json

    pushed = [{"attempt": 3, "started_ms": 30}, {"attempt": 1, "started_ms": 10}]
    pushed.append({"attempt": 2, "started_ms": 20})
    newest_first = [json.dumps(r) for r in reversed(pushed)] + ["not json"]
    assert [x["attempt"] for x in parse_attempts(newest_first)] == [1, 2, 3]
