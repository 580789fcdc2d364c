"""add_delayed_job (docs/protocol.md §4.2): Queue.add with delay > 0."""

from __future__ import annotations

import redis

from .helpers import (
    NOW,
    delayed_score,
    event_names,
    events,
    job_hash,
    markers,
    new_queue,
    zset,
)


def test_delayed_score_hash_and_event(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The job goes to `delayed` with score (timestamp+delay)*4096, keeps its
    relative `delay` in the hash, and `delayed` carries the absolute due ms."""
    q = new_queue(redis_url, qname)
    job = q.add("later", {"a": 1}, delay=5000, timestamp=NOW)
    assert job.id == "1"
    assert r.type(q.keys.delayed) == "zset"
    assert zset(r, q.keys.delayed) == [("1", float(delayed_score(NOW + 5000)))]
    h = job_hash(r, q, "1")
    assert h["delay"] == "5000"
    assert h["timestamp"] == str(NOW)
    assert h["priority"] == "0"
    assert not r.exists(q.keys.wait)
    assert events(r, q) == [
        {"event": "added", "jobId": "1", "name": "later"},
        {"event": "delayed", "jobId": "1", "delay": str(NOW + 5000)},
    ]


def test_delay_marker_holds_earliest_due(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The marker member "1" carries the earliest due time in ms, and never "0"."""
    q = new_queue(redis_url, qname)
    q.add("x", delay=5000, timestamp=NOW)
    assert markers(r, q) == {"1": float(NOW + 5000)}
    q.add("x", delay=9000, timestamp=NOW)
    assert markers(r, q) == {"1": float(NOW + 5000)}
    q.add("x", delay=1000, timestamp=NOW)
    assert markers(r, q) == {"1": float(NOW + 1000)}


def test_same_due_ms_keeps_fifo(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Jobs due in the same ms get scores due*4096, +1, +2 (FIFO among them)."""
    q = new_queue(redis_url, qname)
    for _ in range(3):
        q.add("x", delay=100, timestamp=NOW)
    q.add("x", delay=99, timestamp=NOW + 1)
    due = NOW + 100
    assert zset(r, q.keys.delayed) == [
        ("1", float(delayed_score(due, 0))),
        ("2", float(delayed_score(due, 1))),
        ("3", float(delayed_score(due, 2))),
        ("4", float(delayed_score(due, 3))),
    ]


def test_counter_is_capped_at_top_of_the_ms(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """When the ms is full (score at (due+1)*4096-1) the new job gets that top score."""
    q = new_queue(redis_url, qname)
    due = NOW + 100
    top = delayed_score(due + 1) - 1
    r.zadd(q.keys.delayed, {"filler": top})
    q.add("x", delay=100, timestamp=NOW)
    assert r.zscore(q.keys.delayed, "1") == float(top)


def test_paused_queue_still_gets_delay_marker(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The delay marker is written even while the queue is paused."""
    q = new_queue(redis_url, qname)
    q.pause()
    q.add("x", delay=2000, timestamp=NOW)
    assert markers(r, q) == {"1": float(NOW + 2000)}


def test_delayed_with_priority_keeps_priority_field(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """delay wins over priority at add time; the hash keeps `priority` for promotion."""
    q = new_queue(redis_url, qname)
    q.add("x", delay=10, priority=3, timestamp=NOW)
    assert zset(r, q.keys.delayed) == [("1", float(delayed_score(NOW + 10)))]
    assert job_hash(r, q, "1")["priority"] == "3"
    assert not r.exists(q.keys.prioritized)
    assert event_names(r, q) == ["added", "delayed"]


def test_duplicate_custom_id_is_not_rescheduled(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A delayed add with an existing custom id only emits `duplicated`."""
    q = new_queue(redis_url, qname)
    q.add("x", job_id="d1", delay=100, timestamp=NOW)
    q.add("x", job_id="d1", delay=900, timestamp=NOW)
    assert zset(r, q.keys.delayed) == [("d1", float(delayed_score(NOW + 100)))]
    assert event_names(r, q) == ["added", "delayed", "duplicated"]
