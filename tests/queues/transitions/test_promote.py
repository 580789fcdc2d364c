"""promote (docs/protocol.md §4.13): Job.promote."""

from __future__ import annotations

import pytest
import redis

from queues.exceptions import JobNotInState

from .helpers import (
    NOW,
    clear_events,
    events,
    job_hash,
    lst,
    markers,
    new_queue,
    priority_score,
    zset,
)


def test_promote_to_wait_head(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A delayed job is ZREMed from `delayed`, LPUSHed to wait, `delay` set to 0,
    the base marker written and `waiting {prev=delayed}` emitted."""
    q = new_queue(redis_url, qname)
    q.add("w", timestamp=NOW)
    job = q.add("d", delay=60_000, timestamp=NOW)
    clear_events(r, q)
    job.promote()
    assert not r.exists(q.keys.delayed)
    assert lst(r, q.keys.wait) == ["2", "1"]
    assert job_hash(r, q, "2")["delay"] == "0"
    assert markers(r, q)["0"] == 0.0
    assert events(r, q) == [{"event": "waiting", "jobId": "2", "prev": "delayed"}]


def test_promote_prioritized(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A delayed job with priority goes to `prioritized` with a counter score."""
    q = new_queue(redis_url, qname)
    job = q.add("d", delay=60_000, priority=7, timestamp=NOW)
    job.promote()
    assert zset(r, q.keys.prioritized) == [("1", float(priority_score(7, 1)))]
    assert not r.exists(q.keys.wait)


def test_legacy_head_marker_is_dropped(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A legacy "0:" marker at the head of wait is LPOPed before the push."""
    q = new_queue(redis_url, qname)
    q.add("w", timestamp=NOW)
    r.lpush(q.keys.wait, "0:1700000000000")
    q.add("d", delay=60_000, timestamp=NOW).promote()
    assert lst(r, q.keys.wait) == ["2", "1"]


def test_paused_queue_gets_no_marker(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """While paused the job goes to wait without a base marker."""
    q = new_queue(redis_url, qname)
    job = q.add("d", delay=60_000, timestamp=NOW)
    q.pause()
    job.promote()
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.marker)


def test_not_delayed(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A job that is not delayed gives -3 (JobNotInState) and is left alone."""
    q = new_queue(redis_url, qname)
    job = q.add("w", timestamp=NOW)
    clear_events(r, q)
    with pytest.raises(JobNotInState):
        job.promote()
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.events)
