"""drain (docs/protocol.md §4.20): Queue.drain."""

from __future__ import annotations

import redis

from .helpers import NOW, add_active, clear_events, lst, new_queue, write_job, zset


def test_drain_waiting_jobs(r: redis.Redis, redis_url: str, qname: str) -> None:
    """wait, legacy paused and prioritized jobs are deleted with their keys, `pc`
    goes with an empty prioritized set; delayed and active jobs stay; no events."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.add("w", timestamp=NOW)
    q.add("p", priority=3, timestamp=NOW)
    q.add("d", delay=5_000, timestamp=NOW)
    write_job(r, q, "legacy")
    r.lpush(q.keys.paused, "legacy")
    r.rpush(q.keys.logs("2"), "l")
    clear_events(r, q)
    assert q.drain() == 3
    assert not r.exists(q.keys.wait, q.keys.paused, q.keys.prioritized, q.keys.pc)
    assert not r.exists(
        q.keys.job("2"), q.keys.logs("2"), q.keys.job("3"), q.keys.job("legacy")
    )
    assert [m for m, _ in zset(r, q.keys.delayed)] == ["4"]
    assert lst(r, q.keys.active) == ["1"]
    assert r.exists(q.keys.job("1"), q.keys.job("4")) == 2
    assert not r.exists(q.keys.events)


def test_drain_delayed_too(r: redis.Redis, redis_url: str, qname: str) -> None:
    """With delayed=True the delayed set is drained as well."""
    q = new_queue(redis_url, qname)
    q.add("d", delay=5_000, timestamp=NOW)
    assert q.drain(delayed=True) == 1
    assert not r.exists(q.keys.delayed, q.keys.job("1"))


def test_scheduler_iterations_are_kept_in_order(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The current iteration of each job scheduler survives, and kept list entries
    keep their order."""
    q = new_queue(redis_url, qname)
    r.zadd(q.keys.repeat, {"a": 100, "b": 200})
    for job_id, rjk in (("repeat:a:100", "a"), ("repeat:b:200", "b")):
        write_job(r, q, job_id, rjk=rjk)
    write_job(r, q, "plain")
    r.rpush(q.keys.wait, "repeat:a:100", "plain", "repeat:b:200")
    assert q.drain() == 1
    assert lst(r, q.keys.wait) == ["repeat:a:100", "repeat:b:200"]
    assert r.exists(q.keys.job("repeat:a:100"), q.keys.job("repeat:b:200")) == 2
