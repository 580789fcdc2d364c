"""pause (docs/protocol.md §4.15): Queue.pause / Queue.resume with BullMQ 6
semantics."""

from __future__ import annotations

import redis

from .helpers import (
    NOW,
    claimed,
    clear_events,
    events,
    lst,
    markers,
    move_to_active,
    new_queue,
    write_job,
)


def test_pause(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Pause sets meta paused=1, DELs the marker, emits `paused` with no fields;
    jobs stay in `wait` and no `paused` list is written."""
    q = new_queue(redis_url, qname)
    q.add("x", timestamp=NOW)
    q.add("d", delay=1000, timestamp=NOW)
    clear_events(r, q)
    q.pause()
    assert r.hget(q.keys.meta, "paused") == "1"
    assert q.is_paused() is True
    assert not r.exists(q.keys.marker, q.keys.paused)
    assert lst(r, q.keys.wait) == ["1"]
    assert events(r, q) == [{"event": "paused"}]


def test_paused_queue_gives_no_jobs(r: redis.Redis, redis_url: str, qname: str) -> None:
    """While paused adds go to wait without a marker and workers claim nothing."""
    q = new_queue(redis_url, qname)
    q.pause()
    q.add("x", timestamp=NOW)
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.marker)
    assert move_to_active(q) == [[], 0, 0]
    q.resume()
    assert [j for j, _, _ in claimed(move_to_active(q))] == ["1"]


def test_resume_with_jobs(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Resume HDELs paused, writes the base marker when wait or prioritized holds
    jobs, and emits `resumed`."""
    q = new_queue(redis_url, qname)
    q.add("p", priority=1, timestamp=NOW)
    q.pause()
    clear_events(r, q)
    q.resume()
    assert r.hexists(q.keys.meta, "paused") is False
    assert q.is_paused() is False
    assert markers(r, q) == {"0": 0.0}
    assert events(r, q) == [{"event": "resumed"}]


def test_resume_with_only_delayed(r: redis.Redis, redis_url: str, qname: str) -> None:
    """With only delayed jobs, resume writes the delay marker (earliest due ms)."""
    q = new_queue(redis_url, qname)
    q.add("d", delay=3_000, timestamp=NOW)
    q.pause()
    q.resume()
    assert markers(r, q) == {"1": float(NOW + 3_000)}


def test_resume_empty(r: redis.Redis, redis_url: str, qname: str) -> None:
    """An empty queue gets no marker on resume."""
    q = new_queue(redis_url, qname)
    q.pause()
    q.resume()
    assert not r.exists(q.keys.marker)
    assert [e["event"] for e in events(r, q)] == ["paused", "resumed"]


def test_resume_renames_legacy_paused_list(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A v5 `paused` list (written by hand) is RENAMEd to `wait` when wait is absent."""
    q = new_queue(redis_url, qname)
    for job_id in ("a", "b", "c"):
        write_job(r, q, job_id)
    r.hset(q.keys.meta, "paused", 1)
    r.lpush(q.keys.paused, "a", "b", "c")  # v5 order: oldest at the tail
    q.resume()
    assert not r.exists(q.keys.paused)
    assert lst(r, q.keys.wait) == ["c", "b", "a"]
    assert markers(r, q) == {"0": 0.0}
    assert [j for j, _, _ in claimed(move_to_active(q))] == ["a"]


def test_resume_appends_legacy_jobs_at_wait_tail(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """With `wait` present, legacy jobs (older) are moved to its tail in their
    order, so they run before jobs added since."""
    q = new_queue(redis_url, qname)
    r.lpush(q.keys.paused, "old1", "old2")  # old1 is the oldest (tail)
    q.pause()
    q.add("new", timestamp=NOW)
    q.resume()
    assert lst(r, q.keys.wait) == ["1", "old2", "old1"]
    assert not r.exists(q.keys.paused)


def test_resume_migrates_large_legacy_list_in_chunks(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """More than 7000 legacy ids are moved over several calls; `resumed` is
    emitted once and the order is kept."""
    q = new_queue(redis_url, qname)
    legacy = [f"L{n}" for n in range(7_005)]  # head to tail
    r.rpush(q.keys.paused, *legacy)
    q.add("new", timestamp=NOW)
    q.pause()
    clear_events(r, q)
    q.resume()
    assert not r.exists(q.keys.paused)
    assert lst(r, q.keys.wait) == ["1", *legacy]
    assert events(r, q) == [{"event": "resumed"}]
