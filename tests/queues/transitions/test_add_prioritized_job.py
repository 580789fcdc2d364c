"""add_prioritized_job (docs/protocol.md §4.3): Queue.add with priority > 0."""

from __future__ import annotations

import redis

from .helpers import NOW, events, job_hash, markers, new_queue, priority_score, zset


def test_scores_are_priority_times_2_32_plus_counter(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Each insert INCRs `pc`; score = priority*2^32 + counter, so lower priority
    numbers pop first and FIFO holds within a priority."""
    q = new_queue(redis_url, qname)
    q.add("x", priority=5, timestamp=NOW)
    q.add("x", priority=5, timestamp=NOW)
    q.add("x", priority=1, timestamp=NOW)
    assert r.type(q.keys.prioritized) == "zset"
    assert zset(r, q.keys.prioritized) == [
        ("3", float(priority_score(1, 3))),
        ("1", float(priority_score(5, 1))),
        ("2", float(priority_score(5, 2))),
    ]
    assert r.get(q.keys.pc) == "3"
    assert job_hash(r, q, "1")["priority"] == "5"
    assert not r.exists(q.keys.wait)


def test_marker_and_events(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A prioritized add writes the base marker and emits `added` then `waiting`."""
    q = new_queue(redis_url, qname)
    q.add("p", priority=2, timestamp=NOW)
    assert markers(r, q) == {"0": 0.0}
    assert events(r, q) == [
        {"event": "added", "jobId": "1", "name": "p"},
        {"event": "waiting", "jobId": "1"},
    ]


def test_paused_or_maxed_gets_no_marker(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """No base marker while paused or at global concurrency; the job is still stored."""
    q = new_queue(redis_url, qname)
    r.hset(q.keys.meta, "paused", 1)
    q.add("x", priority=2, timestamp=NOW)
    assert not r.exists(q.keys.marker)
    r.hdel(q.keys.meta, "paused")
    q.set_global_concurrency(1)
    r.lpush(q.keys.active, "busy")
    q.add("x", priority=2, timestamp=NOW)
    assert not r.exists(q.keys.marker)
    assert [m for m, _ in zset(r, q.keys.prioritized)] == ["1", "2"]


def test_highest_priority_limit(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The largest allowed priority, 2^21-1, still encodes exactly in the score."""
    q = new_queue(redis_url, qname)
    q.add("x", priority=2**21 - 1, timestamp=NOW)
    assert r.zscore(q.keys.prioritized, "1") == float(priority_score(2**21 - 1, 1))
