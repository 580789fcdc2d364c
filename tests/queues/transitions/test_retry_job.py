"""retry_job (docs/protocol.md §4.8): a failed attempt retried at once."""

from __future__ import annotations

import redis

from .helpers import (
    NOW,
    add_active,
    clear_events,
    delayed_score,
    events,
    job_hash,
    lst,
    markers,
    move_to_active,
    new_queue,
    priority_score,
    retry_job,
    zset,
)


def test_retry_to_wait_head(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The job leaves active for the head of `wait` (LPUSH), atm+1, fields written,
    lock released, base marker set, `waiting {prev=active}` emitted."""
    q = new_queue(redis_url, qname)
    add_active(q, attempts=2)
    q.add("other", timestamp=NOW)
    r.sadd(q.keys.stalled, "1")
    r.delete(q.keys.marker)
    clear_events(r, q)
    assert (
        retry_job(q, "1", fields=["failedReason", "oops", "stacktrace", '["t"]']) == 0
    )
    assert lst(r, q.keys.wait) == ["1", "2"]
    assert not r.exists(q.keys.active, q.keys.lock("1"), q.keys.stalled)
    h = job_hash(r, q, "1")
    assert (h["atm"], h["failedReason"], h["stacktrace"]) == ("1", "oops", '["t"]')
    assert markers(r, q) == {"0": 0.0}
    assert events(r, q) == [{"event": "waiting", "jobId": "1", "prev": "active"}]


def test_lifo_retry_to_wait_tail(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A lifo job is RPUSHed to the tail, so it runs next."""
    q = new_queue(redis_url, qname)
    add_active(q, lifo=True)
    q.add("other", timestamp=NOW)
    retry_job(q, "1", lifo=True)
    assert lst(r, q.keys.wait) == ["2", "1"]


def test_prioritized_retry(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A job with priority goes back to `prioritized` with a fresh counter score."""
    q = new_queue(redis_url, qname)
    q.add("p", priority=3, timestamp=NOW)
    move_to_active(q)
    retry_job(q, "1")
    assert zset(r, q.keys.prioritized) == [("1", float(priority_score(3, 2)))]
    assert not r.exists(q.keys.wait)


def test_paused_retry_has_no_marker(r: redis.Redis, redis_url: str, qname: str) -> None:
    """While paused the job returns to wait without a marker."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.pause()
    retry_job(q, "1")
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.marker)


def test_promotes_due_delayed_jobs_first(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Due delayed jobs are promoted before the retried job is pushed."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.add("d", delay=10, timestamp=NOW - 10)
    q.add("later", delay=10, timestamp=NOW)
    clear_events(r, q)
    retry_job(q, "1", now=NOW)
    assert lst(r, q.keys.wait) == ["1", "2"]
    assert zset(r, q.keys.delayed) == [("3", float(delayed_score(NOW + 10)))]
    assert [e["jobId"] for e in events(r, q)] == ["2", "1"]


def test_error_codes(r: redis.Redis, redis_url: str, qname: str) -> None:
    """-1 missing, -6 other token, -2 no lock, -3 not active; atm untouched."""
    q = new_queue(redis_url, qname)
    add_active(q)
    assert retry_job(q, "nope") == -1
    assert retry_job(q, "1", token="x:0") == -6
    r.delete(q.keys.lock("1"))
    assert retry_job(q, "1") == -2
    r.lrem(q.keys.active, 0, "1")
    r.set(q.keys.lock("1"), "w1:0")
    assert retry_job(q, "1") == -3
    assert "atm" not in job_hash(r, q, "1")
    assert not r.exists(q.keys.wait)
