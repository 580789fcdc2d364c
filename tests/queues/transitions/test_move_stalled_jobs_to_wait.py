"""move_stalled_jobs_to_wait (docs/protocol.md §4.9): the stalled-job check."""

from __future__ import annotations

import redis

from queues.queue import Queue

from .helpers import (
    NOW,
    STALLED_MS,
    add_active,
    clear_events,
    events,
    job_hash,
    lst,
    markers,
    move_stalled,
    new_queue,
)


def _stall(r: redis.Redis, q: Queue, job_id: str) -> None:
    """Make an active job look dead: no lock, already a stalled candidate."""
    r.delete(q.keys.lock(job_id))
    r.sadd(q.keys.stalled, job_id)


def test_first_check_only_marks_candidates(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A check takes the `stalled-check` mutex (value now, PX interval), moves nothing
    new, and SADDs every active id to `stalled` for the next check."""
    q = new_queue(redis_url, qname)
    add_active(q)
    assert move_stalled(q) == []
    assert r.get(q.keys.stalled_check) == str(NOW)
    assert 0 < r.pttl(q.keys.stalled_check) <= STALLED_MS
    assert r.type(q.keys.stalled) == "set"
    assert r.smembers(q.keys.stalled) == {"1"}
    assert lst(r, q.keys.active) == ["1"]


def test_mutex_skips_a_second_check(r: redis.Redis, redis_url: str, qname: str) -> None:
    """While `stalled-check` exists the check returns [] and changes nothing."""
    q = new_queue(redis_url, qname)
    add_active(q)
    move_stalled(q)
    _stall(r, q, "1")
    assert move_stalled(q) == []
    assert lst(r, q.keys.active) == ["1"]


def test_stalled_job_goes_to_wait_tail(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A candidate without a lock leaves active for the wait tail (runs next), gets
    stc+1, the base marker, and `waiting {prev=active}` then `stalled`."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.add("other", timestamp=NOW)
    _stall(r, q, "1")
    r.delete(q.keys.marker)
    clear_events(r, q)
    assert move_stalled(q) == ["1"]
    assert lst(r, q.keys.wait) == ["2", "1"]
    assert not r.exists(q.keys.active, q.keys.stalled)
    h = job_hash(r, q, "1")
    assert h["stc"] == "1"
    assert "defa" not in h
    assert markers(r, q) == {"0": 0.0}
    assert events(r, q) == [
        {"event": "waiting", "jobId": "1", "prev": "active"},
        {"event": "stalled", "jobId": "1"},
    ]
    assert r.hget(q.keys.meta, "opts.maxLenEvents") == "10000"


def test_locked_job_is_kept(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A candidate whose lock still exists is alive: it stays active and is a
    candidate again."""
    q = new_queue(redis_url, qname)
    add_active(q)
    r.sadd(q.keys.stalled, "1")
    assert move_stalled(q) == []
    assert lst(r, q.keys.active) == ["1"]
    assert r.smembers(q.keys.stalled) == {"1"}
    assert "stc" not in job_hash(r, q, "1")


def test_over_the_limit_sets_deferred_failure(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Once stc > maxStalledCount the job gets `defa`; it is requeued, not failed."""
    q = new_queue(redis_url, qname)
    add_active(q)
    r.hset(q.keys.job("1"), "stc", 1)
    _stall(r, q, "1")
    assert move_stalled(q, max_stalled=1) == ["1"]
    h = job_hash(r, q, "1")
    assert h["stc"] == "2"
    assert h["defa"] == "job stalled more than allowable limit"
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.failed)


def test_live_scheduler_job_gets_no_deferred_failure(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A job of a job scheduler that still exists never gets `defa`."""
    q = new_queue(redis_url, qname)
    add_active(q)
    r.hset(q.keys.job("1"), mapping={"stc": 5, "rjk": "nightly"})
    r.zadd(q.keys.repeat, {"nightly": NOW + 1000})
    _stall(r, q, "1")
    assert move_stalled(q, max_stalled=1) == ["1"]
    assert "defa" not in job_hash(r, q, "1")


def test_legacy_marker_is_dropped(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A legacy "0:" id in `stalled` is only LREMed from active."""
    q = new_queue(redis_url, qname)
    r.lpush(q.keys.active, "0:123")
    r.sadd(q.keys.stalled, "0:123")
    assert move_stalled(q) == []
    assert not r.exists(q.keys.active, q.keys.wait, q.keys.stalled)


def test_paused_queue_gets_no_marker(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A stalled job of a paused queue returns to wait without a marker."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.pause()
    _stall(r, q, "1")
    assert move_stalled(q) == ["1"]
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.marker)
