"""clean_jobs_in_set (docs/protocol.md §4.16): Queue.clean(grace_ms, limit, state).

The client computes the cutoff from the wall clock (now - grace), so these
tests date jobs far in the past (OLD) or the future (YOUNG).
"""

from __future__ import annotations

import redis

from queues.ops import now_ms

from .helpers import events, lst, new_queue, write_job, zset

GRACE = 60_000


def _stamps() -> tuple[int, int]:
    now = now_ms()
    return now - 10 * GRACE, now + 10 * GRACE


def test_completed_by_finished_on(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Completed ids with score <= now-grace are removed with their keys; one
    `cleaned {count}` event; the removed ids are returned."""
    q = new_queue(redis_url, qname)
    old, young = _stamps()
    for job_id, score in (("o1", old), ("o2", old + 1), ("y", young)):
        write_job(r, q, job_id, finishedOn=score)
        r.rpush(q.keys.logs(job_id), "l")
        r.zadd(q.keys.completed, {job_id: score})
    assert sorted(q.clean(GRACE)) == ["o1", "o2"]
    assert zset(r, q.keys.completed) == [("y", float(young))]
    assert not r.exists(q.keys.job("o1"), q.keys.logs("o1"), q.keys.job("o2"))
    assert events(r, q) == [{"event": "cleaned", "count": "2"}]


def test_limit(r: redis.Redis, redis_url: str, qname: str) -> None:
    """At most `limit` jobs are removed, oldest first."""
    q = new_queue(redis_url, qname)
    old, _ = _stamps()
    for n in range(4):
        write_job(r, q, f"f{n}")
        r.zadd(q.keys.failed, {f"f{n}": old + n})
    assert q.clean(GRACE, limit=3, state="failed") == ["f0", "f1", "f2"]
    assert [m for m, _ in zset(r, q.keys.failed)] == ["f3"]
    assert events(r, q) == [{"event": "cleaned", "count": "3"}]


def test_delayed_by_timestamp(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Delayed jobs are judged by processedOn, else timestamp (not by due time)."""
    q = new_queue(redis_url, qname)
    old, young = _stamps()
    write_job(r, q, "old", timestamp=old)
    write_job(r, q, "retried", timestamp=old, processedOn=young)
    write_job(r, q, "young", timestamp=young)
    for job_id in ("old", "retried", "young"):
        r.zadd(q.keys.delayed, {job_id: 1})
    assert q.clean(GRACE, state="delayed") == ["old"]
    assert sorted(m for m, _ in zset(r, q.keys.delayed)) == ["retried", "young"]


def test_prioritized_by_timestamp(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Prioritized jobs are judged by timestamp."""
    q = new_queue(redis_url, qname)
    old, young = _stamps()
    q.add("a", priority=1, timestamp=old)
    q.add("b", priority=1, timestamp=young)
    assert q.clean(GRACE, state="prioritized") == ["1"]
    assert [m for m, _ in zset(r, q.keys.prioritized)] == ["2"]
    assert not r.exists(q.keys.job("1"))


def test_wait_list(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Wait jobs are judged by finishedOn/processedOn/timestamp; removed entries
    are taken out of the list and the rest keep their order."""
    q = new_queue(redis_url, qname)
    old, young = _stamps()
    q.add("a", timestamp=old)
    q.add("b", timestamp=young)
    q.add("c", timestamp=old)
    q.add("d", timestamp=young)
    assert sorted(q.clean(GRACE, state="wait")) == ["1", "3"]
    assert lst(r, q.keys.wait) == ["4", "2"]


def test_legacy_paused_list(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A legacy `paused` list is cleaned like wait."""
    q = new_queue(redis_url, qname)
    old, young = _stamps()
    write_job(r, q, "p1", timestamp=old)
    write_job(r, q, "p2", timestamp=young)
    r.lpush(q.keys.paused, "p1", "p2")
    assert q.clean(GRACE, state="paused") == ["p1"]
    assert lst(r, q.keys.paused) == ["p2"]


def test_active_only_unlocked(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Active jobs are removed only when they have no lock."""
    q = new_queue(redis_url, qname)
    old, _ = _stamps()
    write_job(r, q, "dead", timestamp=old, processedOn=old)
    write_job(r, q, "alive", timestamp=old, processedOn=old)
    r.lpush(q.keys.active, "dead", "alive")
    r.set(q.keys.lock("alive"), "tok")
    assert q.clean(GRACE, state="active") == ["dead"]
    assert lst(r, q.keys.active) == ["alive"]


def test_current_scheduler_iteration_is_kept(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The current iteration of a job scheduler is never cleaned."""
    q = new_queue(redis_url, qname)
    old, _ = _stamps()
    millis = 1_700_000_000_000
    current = f"repeat:s1:{millis}"
    r.zadd(q.keys.repeat, {"s1": millis})
    write_job(r, q, current, timestamp=old, rjk="s1")
    write_job(r, q, "plain", timestamp=old)
    r.zadd(q.keys.delayed, {current: 1, "plain": 2})
    assert q.clean(GRACE, state="delayed") == ["plain"]
    assert [m for m, _ in zset(r, q.keys.delayed)] == [current]


def test_nothing_to_clean(r: redis.Redis, redis_url: str, qname: str) -> None:
    """An empty clean still emits `cleaned {count=0}`."""
    q = new_queue(redis_url, qname)
    assert q.clean(GRACE) == []
    assert events(r, q) == [{"event": "cleaned", "count": "0"}]
