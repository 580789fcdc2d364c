"""reprocess_job (docs/protocol.md §4.12): Job.retry of a failed or completed job."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from queues import codec
from queues.exceptions import JobNotFound, JobNotInState
from queues.queue import Queue

from .helpers import (
    NOW,
    add_active,
    clear_events,
    entry,
    events,
    job_hash,
    lst,
    markers,
    move_to_active,
    move_to_finished,
    new_queue,
    priority_score,
    zset,
)


def _failed(r: redis.Redis, q: Queue, **options: Any) -> str:
    job_id = add_active(q, **options)
    r.hset(q.keys.job(job_id), "stc", 1)
    move_to_finished(
        q,
        [
            entry(
                job_id,
                "failed",
                "bad",
                attempts=1,
                fields=["failedReason", "bad", "stacktrace", '["s"]'],
            )
        ],
        now=NOW + 5,
    )
    return job_id


def test_retry_failed(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The job leaves `failed` for the wait head; finishedOn, processedOn and
    failedReason are deleted; stacktrace, atm, ats and stc are kept; the base
    marker is set and `waiting {prev=failed}` emitted."""
    q = new_queue(redis_url, qname)
    _failed(r, q)
    q.add("newer", timestamp=NOW)
    r.delete(q.keys.marker)
    clear_events(r, q)
    assert q.get_job("1").retry() == 1
    assert not r.exists(q.keys.failed)
    assert lst(r, q.keys.wait) == ["1", "2"]
    h = job_hash(r, q, "1")
    assert not {"finishedOn", "processedOn", "failedReason"} & set(h)
    assert (h["stacktrace"], h["atm"], h["ats"], h["stc"]) == ('["s"]', "1", "1", "1")
    assert markers(r, q) == {"0": 0.0}
    assert events(r, q) == [{"event": "waiting", "jobId": "1", "prev": "failed"}]


def test_retry_completed_with_resets(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A completed job loses `returnvalue`; reset flags delete `atm` and `ats`."""
    q = new_queue(redis_url, qname)
    add_active(q)
    move_to_finished(q, [entry("1", value='"done"')], now=NOW + 5)
    clear_events(r, q)
    q.get_job("1").retry(
        "completed", reset_attempts_made=True, reset_attempts_started=True
    )
    h = job_hash(r, q, "1")
    assert not {"returnvalue", "finishedOn", "processedOn", "atm", "ats"} & set(h)
    assert not r.exists(q.keys.completed)
    assert events(r, q) == [{"event": "waiting", "jobId": "1", "prev": "completed"}]


def test_priority_job_is_requeued_by_priority_and_lifo_goes_to_tail(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A failed job with a priority goes back to `prioritized` with a new `pc`
    counter, behind the jobs of its priority already waiting (BullMQ 6.7.0
    reprocessJob), not to the head of `wait`; lifo RPUSHes."""
    q = new_queue(redis_url, qname)
    _failed(r, q, priority=5)
    q.add("same", timestamp=NOW, priority=5)
    q.add("w", timestamp=NOW)
    q.get_job("1").retry()
    assert lst(r, q.keys.wait) == ["3"]
    assert zset(r, q.keys.prioritized) == [
        ("2", priority_score(5, 2)),
        ("1", priority_score(5, 3)),
    ]
    assert r.get(q.keys.pc) == "3"
    _failed(r, q, lifo=True)
    q.get_job("4").retry()
    assert lst(r, q.keys.wait)[-1] == "4"


def test_completed_priority_job_is_requeued_by_priority(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Retrying a completed job with a priority also uses `prioritized`."""
    q = new_queue(redis_url, qname)
    add_active(q, priority=2)
    move_to_finished(q, [entry("1", value='"done"')], now=NOW + 5)
    q.get_job("1").retry("completed")
    assert not r.exists(q.keys.wait)
    assert zset(r, q.keys.prioritized) == [("1", priority_score(2, 2))]
    assert markers(r, q) == {"0": 0.0}


def test_paused_queue_gets_no_marker(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """While paused the job returns to wait without a marker."""
    q = new_queue(redis_url, qname)
    _failed(r, q)
    q.pause()
    q.get_job("1").retry()
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.marker)


def test_error_codes(r: redis.Redis, redis_url: str, qname: str) -> None:
    """-3 when the job is not in that state (JobNotInState), -1 when it is missing."""
    q = new_queue(redis_url, qname)
    _failed(r, q)
    job = q.get_job("1")
    with pytest.raises(JobNotInState):
        job.retry("completed")
    assert r.zscore(q.keys.failed, "1") is not None
    r.delete(q.keys.job("1"))
    with pytest.raises(JobNotFound):
        job.retry()


def test_parent_dependency_restored(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A child whose result the parent recorded becomes a pending dependency again;
    one the parent dropped (rdof) stays dropped."""
    q = new_queue(redis_url, qname)
    parent_key = q.keys.job("parent")
    r.hset(parent_key, mapping={"name": "p", "data": "{}"})
    for flags in ({"idof": True}, {"rdof": True}):
        job = q.add("c", timestamp=NOW)
        r.hset(
            q.keys.job(job.id),
            mapping={
                "parentKey": parent_key,
                "parent": codec.dumps(
                    {"id": "parent", "queueKey": q.keys.qualified_name, **flags}
                ),
            },
        )
        r.sadd(parent_key + ":dependencies", q.keys.job(job.id))
    move_to_active(q, count=2)
    move_to_finished(
        q,
        [
            entry("1", "failed", "e1", token="w1:0"),
            entry("2", "failed", "e2", token="w1:1"),
        ],
    )
    assert r.hgetall(parent_key + ":failed") == {q.keys.job("1"): "e1"}
    assert not r.exists(parent_key + ":dependencies")
    q.get_job("1").retry()
    q.get_job("2").retry()
    assert r.smembers(parent_key + ":dependencies") == {q.keys.job("1")}
    assert not r.exists(parent_key + ":failed")
