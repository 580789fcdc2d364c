"""move_to_delayed (docs/protocol.md §4.8): a failed attempt retried after a backoff."""

from __future__ import annotations

import redis

from queues import codec

from .helpers import (
    NOW,
    add_active,
    clear_events,
    delayed_score,
    events,
    job_hash,
    markers,
    move_to_delayed,
    new_queue,
    zset,
)


def test_backoff_retry(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The job leaves active for `delayed` with score (now+delay)*4096, keeps the
    relative `delay`, gets atm+1 and its failure fields; the lock is released;
    `delayed {delay=<absolute due>}` is emitted (no `failed`) and the delay
    marker set to the due time."""
    q = new_queue(redis_url, qname)
    add_active(q, attempts=3)
    r.sadd(q.keys.stalled, "1")
    clear_events(r, q)
    trace = codec.dumps(["trace"])
    assert (
        move_to_delayed(
            q,
            "1",
            2_000,
            now=NOW + 50,
            fields=["failedReason", "flaky", "stacktrace", trace],
        )
        == 0
    )
    due = NOW + 50 + 2_000
    assert zset(r, q.keys.delayed) == [("1", float(delayed_score(due)))]
    assert not r.exists(q.keys.active, q.keys.lock("1"), q.keys.stalled)
    h = job_hash(r, q, "1")
    assert h["delay"] == "2000"
    assert h["atm"] == "1"
    assert h["failedReason"] == "flaky"
    assert h["stacktrace"] == trace
    assert "finishedOn" not in h
    assert events(r, q) == [{"event": "delayed", "jobId": "1", "delay": str(due)}]
    assert markers(r, q) == {"0": 0.0, "1": float(due)}


def test_skip_attempt(r: redis.Redis, redis_url: str, qname: str) -> None:
    """With skipAttempt, `atm` is not incremented."""
    q = new_queue(redis_url, qname)
    add_active(q)
    move_to_delayed(q, "1", 100, skip_attempt=True)
    assert "atm" not in job_hash(r, q, "1")


def test_same_ms_counter(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A job due in the same ms as an existing delayed job gets the next score."""
    q = new_queue(redis_url, qname)
    q.add("d", delay=1_000, timestamp=NOW)
    add_active(q)
    move_to_delayed(q, "2", 1_000, now=NOW)
    assert zset(r, q.keys.delayed) == [
        ("1", float(delayed_score(NOW + 1_000))),
        ("2", float(delayed_score(NOW + 1_000, 1))),
    ]
    assert markers(r, q)["1"] == float(NOW + 1_000)


def test_error_codes(r: redis.Redis, redis_url: str, qname: str) -> None:
    """-1 missing, -6 other token, -2 no lock, -3 not active."""
    q = new_queue(redis_url, qname)
    add_active(q)
    assert move_to_delayed(q, "nope", 10) == -1
    assert move_to_delayed(q, "1", 10, token="x:0") == -6
    r.delete(q.keys.lock("1"))
    assert move_to_delayed(q, "1", 10) == -2
    r.lrem(q.keys.active, 0, "1")
    r.set(q.keys.lock("1"), "w1:0")
    assert move_to_delayed(q, "1", 10) == -3
    assert not r.exists(q.keys.delayed)
