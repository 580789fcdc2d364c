"""drain (docs/protocol.md §4.20): Queue.drain."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from queues import defaults

from .helpers import (
    NOW,
    add_active,
    clear_events,
    lst,
    move_to_active,
    new_queue,
    write_job,
    zset,
)


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


def test_a_long_backlog_drains_a_batch_a_call(
    r: redis.Redis, redis_url: str, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call removes DRAIN_BATCH jobs, plus at most one a job scheduler (a
    million in one call held Redis ten seconds): every call but the last
    says more may be left, kept iterations stay in place across calls in
    every source (wait, prioritized, delayed, grouped with a turn or
    parked), and the calls together remove everything else."""
    monkeypatch.setattr(defaults, "DRAIN_BATCH", 4)
    q = new_queue(redis_url, qname)
    q.pause_group("held")
    for _ in range(3):
        q.add("g", group="held", timestamp=NOW)
    assert move_to_active(q, count=3)[0] == []  # parks held's tickets
    r.zadd(q.keys.repeat, {"a": 100, "b": 200, "c": 300})
    write_job(r, q, "repeat:a:100", rjk="a")
    write_job(r, q, "repeat:b:200", rjk="b")
    write_job(r, q, "repeat:c:300", rjk="c", priority=1)
    for i in range(5):
        q.add("w", timestamp=NOW + i)
    r.rpush(q.keys.wait, "repeat:a:100")  # the oldest: next out
    r.lpush(q.keys.wait, "repeat:b:200")  # the newest
    for _ in range(5):
        q.add("p", priority=2, timestamp=NOW)
    r.zadd(q.keys.prioritized, {"repeat:c:300": 0})
    for _ in range(5):
        q.add("d", delay=5_000, timestamp=NOW)
    for i in range(6):
        q.add("g", group=f"g{i % 2}", timestamp=NOW)
    assert int(r.hget(q.keys.groups_meta, "pk") or 0) == 3
    calls = []
    while True:
        removed, more = q.scripts.drain(
            (q.keys.wait, q.keys.paused, q.keys.prioritized, q.keys.delayed, q.keys.pc),
            (q.keys.base, "1", 4),
        )
        calls.append(removed)
        assert removed <= 4 + 3  # the batch, and one a scheduler at most
        if not more:
            break
        assert removed >= 4
    assert sum(calls) == 5 + 5 + 5 + 3 + 6 and len(calls) >= 24 // (4 + 3)
    assert lst(r, q.keys.wait) == ["repeat:b:200", "repeat:a:100"]
    assert [m for m, _ in zset(r, q.keys.prioritized)] == ["repeat:c:300"]
    assert not r.exists(q.keys.delayed, q.keys.groups_q)
    assert q.get_counts("waiting", "prioritized", "delayed") == {
        "waiting": 2,
        "prioritized": 1,
        "delayed": 0,
    }
    assert int(r.hget(q.keys.groups_meta, "pk") or 0) == 0
    assert q.drain() == 0  # through the op, which loops as above


def test_a_drain_never_holds_redis_for_the_whole_backlog(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Queue.drain of 5,000 jobs goes in calls of DRAIN_BATCH (1,000): six
    calls, none removing more than 1,000."""
    q = new_queue(redis_url, qname)
    for _ in range(5):
        q.add_bulk([{"name": "w", "data": {}}] * 1000)
    real = q.scripts.drain
    replies: list[Any] = []

    def counted(keys: Any, args: Any) -> Any:
        replies.append(real(keys, args))
        return replies[-1]

    q.scripts.drain = counted  # type: ignore[method-assign]
    assert q.drain() == 5000
    assert [list(x) for x in replies] == [[1000, 1]] * 5 + [[0, 0]]
    assert q.get_counts("waiting") == {"waiting": 0}
