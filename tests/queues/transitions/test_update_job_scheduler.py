"""update_job_scheduler: the next iteration, produced when a worker takes the
current one (as Node's worker does on moving it to active)."""

from __future__ import annotations

from typing import Any

import redis

from queues import codec, scheduler

from .helpers import NOW, clear_events, event_names, job_hash, new_queue, zset
from .test_add_job_scheduler import upsert


def produce(q: Any, job_id: str, now: int) -> Any:
    """Run next_iteration for an existing iteration job at `now`."""
    h = job_hash_of(q, job_id)
    return q.drive(scheduler.next_iteration(q.keys, job_id, h["rjk"], h["opts"], now))


def job_hash_of(q: Any, job_id: str) -> dict[str, str]:
    return dict(q.client.hgetall(q.keys.job(job_id)))


def test_every_next_iteration(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The current iteration produces prev+every: delayed until then, ic+1,
    `repeat` rescored, opts.repeat.count+1, a fresh timestamp, data and name
    from the scheduler hash; `added` then `delayed`."""
    q = new_queue(redis_url, qname)
    upsert(q, "s1", every_ms=1000, template={"name": "tick", "data": {"a": 1}})
    clear_events(r, q)
    now = NOW + 10
    nxt = f"repeat:s1:{NOW + 1000}"
    assert produce(q, f"repeat:s1:{NOW}", now) == nxt
    assert zset(r, q.keys.repeat) == [("s1", float(NOW + 1000))]
    assert r.hget(q.keys.scheduler("s1"), "ic") == "2"
    h = job_hash(r, q, nxt)
    assert (h["name"], h["data"], h["rjk"], h["delay"]) == (
        "tick",
        '{"a":1}',
        "s1",
        "990",
    )
    opts = codec.loads(h["opts"])
    assert opts["repeat"] == {"every": 1000, "count": 2}
    assert (opts["jobId"], opts["delay"], opts["timestamp"]) == (nxt, 990, now)
    assert zset(r, q.keys.delayed) == [(nxt, float((NOW + 1000) * 4096))]
    assert event_names(r, q) == ["added", "delayed"]
    assert r.get(q.keys.id) == "2"


def test_only_the_current_iteration_produces(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A second take of the same iteration (a retry) adds nothing; neither does
    an iteration of a removed scheduler."""
    q = new_queue(redis_url, qname)
    upsert(q, "s1", every_ms=1000)
    produce(q, f"repeat:s1:{NOW}", NOW)
    assert produce(q, f"repeat:s1:{NOW}", NOW + 5) is None
    assert r.hget(q.keys.scheduler("s1"), "ic") == "2"
    q.remove_job_scheduler("s1")
    assert produce(q, f"repeat:s1:{NOW}", NOW + 5) is None


def test_existing_next_iteration_is_a_duplicate(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """If the next id exists already, `duplicated` is emitted and nothing moves."""
    q = new_queue(redis_url, qname)
    upsert(q, "s1", every_ms=1000)
    r.hset(q.keys.job(f"repeat:s1:{NOW + 1000}"), "name", "x")
    clear_events(r, q)
    assert produce(q, f"repeat:s1:{NOW}", NOW) is None
    assert event_names(r, q) == ["duplicated"]
    assert zset(r, q.keys.repeat) == [("s1", float(NOW))]


def test_missed_runs_skip_to_the_next_slot(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Taken long after its time, an iteration's successor is the next slot
    after now that keeps the scheduler's offset."""
    q = new_queue(redis_url, qname)
    upsert(q, "s1", every_ms=1000)
    late = NOW + 5_500
    assert produce(q, f"repeat:s1:{NOW}", late) == f"repeat:s1:{NOW + 6000}"


def test_cron_next_iteration_and_limit(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Cron: the next run after max(now, prevMillis); once count reaches the
    limit no iteration is added."""
    q = new_queue(redis_url, qname)
    due = (NOW // 5000 + 1) * 5000
    upsert(q, "c1", cron="*/5 * * * * *", limit=2)
    second = f"repeat:c1:{due + 5000}"
    assert produce(q, f"repeat:c1:{due}", NOW) == second
    assert codec.loads(job_hash(r, q, second)["opts"])["prevMillis"] == due + 5000
    assert produce(q, second, due + 5000) is None
    assert zset(r, q.keys.repeat) == [("c1", float(due + 5000))]
