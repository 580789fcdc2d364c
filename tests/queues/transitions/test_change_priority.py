"""change_priority (docs/protocol.md §4.19): Job.change_priority."""

from __future__ import annotations

import pytest
import redis

from queues.exceptions import JobNotFound

from .helpers import (
    NOW,
    add_active,
    clear_events,
    delayed_score,
    job_hash,
    lst,
    markers,
    new_queue,
    priority_score,
    zset,
)


def test_waiting_job_becomes_prioritized(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A job in wait (LREM -1) is re-added to prioritized with a counter score, the
    `priority` field is set, the marker written; no event is emitted."""
    q = new_queue(redis_url, qname)
    job = q.add("w", timestamp=NOW)
    q.add("w2", timestamp=NOW)
    r.delete(q.keys.marker)
    clear_events(r, q)
    job.change_priority(4)
    assert lst(r, q.keys.wait) == ["2"]
    assert zset(r, q.keys.prioritized) == [("1", float(priority_score(4, 1)))]
    assert job_hash(r, q, "1")["priority"] == "4"
    assert markers(r, q) == {"0": 0.0}
    assert not r.exists(q.keys.events)


def test_lifo_goes_first_among_equals(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """With lifo the score is priority*2^32 (counter 0), ahead of equal priorities."""
    q = new_queue(redis_url, qname)
    q.add("a", priority=2, timestamp=NOW)
    job = q.add("b", priority=5, timestamp=NOW)
    job.change_priority(2, lifo=True)
    assert zset(r, q.keys.prioritized) == [
        ("2", float(priority_score(2, 0))),
        ("1", float(priority_score(2, 1))),
    ]


def test_back_to_wait(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Priority 0 moves a prioritized job to the wait head (LPUSH), or the tail
    (RPUSH) with lifo."""
    q = new_queue(redis_url, qname)
    q.add("w", timestamp=NOW)
    a = q.add("a", priority=2, timestamp=NOW)
    b = q.add("b", priority=2, timestamp=NOW)
    a.change_priority(0)
    b.change_priority(0, lifo=True)
    assert lst(r, q.keys.wait) == ["2", "1", "3"]
    assert not r.exists(q.keys.prioritized)
    assert job_hash(r, q, "2")["priority"] == "0"


def test_paused_queue_gets_no_marker(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """While paused the job is re-queued without a marker."""
    q = new_queue(redis_url, qname)
    job = q.add("w", timestamp=NOW)
    q.pause()
    job.change_priority(3)
    assert [m for m, _ in zset(r, q.keys.prioritized)] == ["1"]
    assert not r.exists(q.keys.marker)


def test_other_states_get_only_the_field(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Delayed and active jobs only get the new `priority` field."""
    q = new_queue(redis_url, qname)
    add_active(q)
    d = q.add("d", delay=100, timestamp=NOW)
    q.get_job("1").change_priority(7)
    d.change_priority(8)
    assert lst(r, q.keys.active) == ["1"]
    assert zset(r, q.keys.delayed) == [("2", float(delayed_score(NOW + 100)))]
    assert not r.exists(q.keys.prioritized)
    assert (job_hash(r, q, "1")["priority"], job_hash(r, q, "2")["priority"]) == (
        "7",
        "8",
    )


def test_missing_job(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A missing job gives -1 (JobNotFound)."""
    q = new_queue(redis_url, qname)
    job = q.add("w", timestamp=NOW)
    r.delete(q.keys.job("1"))
    with pytest.raises(JobNotFound):
        job.change_priority(2)
    assert not r.exists(q.keys.job("1"), q.keys.prioritized)
