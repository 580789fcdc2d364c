"""add_job_scheduler (Queue.upsert_job_scheduler): the `repeat` ZSET entry,
the `repeat:{id}` hash and the first iteration `repeat:{id}:{millis}`, laid
out as BullMQ 6 writes them."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from queues import codec, scheduler
from queues.exceptions import SchedulerConflict

from .helpers import NOW, event_names, job_hash, lst, markers, new_queue, zset


def upsert(q: Any, sid: str, now: int = NOW, **kw: Any) -> Any:
    """Run the upsert operation at a fixed `now`."""
    return q.drive(scheduler.upsert(q.keys, sid, now, **kw))


def test_every_first_run_is_now(r: redis.Redis, redis_url: str, qname: str) -> None:
    """`every`: the first iteration runs now (wait + marker, `added` then
    `waiting`); the hash holds name, every, offset (phase of now), template
    opts and data (JSON) and ic=1; `repeat` scores the id at the run; the
    iteration has rjk and opts {...template, repeat {every, count 1},
    jobId, delay 0, timestamp, repeatJobKey}."""
    q = new_queue(redis_url, qname)
    added = upsert(
        q,
        "s1",
        every_ms=1000,
        template={
            "name": "tick",
            "data": {"a": 1},
            "opts": {"attempts": 2, "remove_on_complete": 5},
        },
    )
    job_id = f"repeat:s1:{NOW}"
    assert added == (job_id, 0)
    assert zset(r, q.keys.repeat) == [("s1", float(NOW))]
    assert r.hgetall(q.keys.scheduler("s1")) == {
        "name": "tick",
        "every": "1000",
        "offset": str(NOW % 1000),
        "opts": '{"attempts":2,"removeOnComplete":5}',
        "data": '{"a":1}',
        "ic": "1",
    }
    h = job_hash(r, q, job_id)
    assert set(h) == {"name", "data", "opts", "timestamp", "delay", "priority", "rjk"}
    assert (h["name"], h["data"], h["rjk"], h["delay"]) == (
        "tick",
        '{"a":1}',
        "s1",
        "0",
    )
    assert codec.loads(h["opts"]) == {
        "attempts": 2,
        "removeOnComplete": 5,
        "repeat": {"every": 1000, "count": 1},
        "jobId": job_id,
        "delay": 0,
        "timestamp": NOW,
        "repeatJobKey": "s1",
    }
    assert lst(r, q.keys.wait) == [job_id]
    assert markers(r, q) == {"0": 0.0}
    assert event_names(r, q) == ["added", "waiting"]
    assert r.get(q.keys.id) == "1"


def test_every_with_start_date_is_delayed(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A future startDate is the first run: the iteration is delayed until it,
    and startDate is kept in the hash and in opts.repeat."""
    q = new_queue(redis_url, qname)
    start = NOW + 60_000
    assert upsert(q, "s1", every_ms=1000, start_date=start) == (
        f"repeat:s1:{start}",
        60_000,
    )
    assert zset(r, q.keys.delayed) == [(f"repeat:s1:{start}", float(start * 4096))]
    assert r.hget(q.keys.scheduler("s1"), "startDate") == str(start)
    assert r.hget(q.keys.scheduler("s1"), "name") == "s1"
    opts = codec.loads(job_hash(r, q, f"repeat:s1:{start}")["opts"])
    assert opts["repeat"] == {"every": 1000, "startDate": start, "count": 1}


def test_upsert_again_replaces_the_pending_iteration(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Upserting an unchanged `every` replaces the iteration that has not started
    in the same slot (new template), keeping ic; a changed `every` starts a new
    series at now and the old iteration goes."""
    q = new_queue(redis_url, qname)
    upsert(q, "s1", every_ms=1000, template={"data": {"v": 1}})
    r.hset(q.keys.scheduler("s1"), "ic", 4)
    later = NOW + 300
    assert upsert(q, "s1", later, every_ms=1000, template={"data": {"v": 2}}) == (
        f"repeat:s1:{NOW}",
        0,
    )
    assert job_hash(r, q, f"repeat:s1:{NOW}")["data"] == '{"v":2}'
    assert r.hget(q.keys.scheduler("s1"), "ic") == "4"
    assert lst(r, q.keys.wait) == [f"repeat:s1:{NOW}"]
    assert upsert(q, "s1", later, every_ms=5000) == (f"repeat:s1:{later}", 0)
    assert lst(r, q.keys.wait) == [f"repeat:s1:{later}"]
    assert not r.exists(q.keys.job(f"repeat:s1:{NOW}"))
    assert r.hget(q.keys.scheduler("s1"), "every") == "5000"


def test_started_iteration_is_kept(r: redis.Redis, redis_url: str, qname: str) -> None:
    """An iteration already active is not removed; an `every` slot taken by it
    moves the new iteration to the next free slot."""
    q = new_queue(redis_url, qname)
    upsert(q, "s1", every_ms=1000)
    first = f"repeat:s1:{NOW}"
    r.lrem(q.keys.wait, 0, first)
    r.lpush(q.keys.active, first)
    assert upsert(q, "s1", NOW, every_ms=1000) == (f"repeat:s1:{NOW + 1000}", 1000)
    assert r.exists(q.keys.job(first))
    assert zset(r, q.keys.repeat) == [("s1", float(NOW + 1000))]


def test_cron(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A cron scheduler gets its next run from croniter (6 fields: seconds
    first), is delayed until it, stores pattern/tz/limit and offset 0, and
    its iteration's opts carry prevMillis and repeat {pattern, tz, limit,
    count}."""
    q = new_queue(redis_url, qname)
    due = (NOW // 5000 + 1) * 5000
    assert upsert(q, "c1", cron="*/5 * * * * *", tz="Europe/Paris", limit=10) == (
        f"repeat:c1:{due}",
        due - NOW,
    )
    assert r.hgetall(q.keys.scheduler("c1")) == {
        "name": "c1",
        "tz": "Europe/Paris",
        "limit": "10",
        "pattern": "*/5 * * * * *",
        "offset": "0",
        "ic": "1",
    }
    opts = codec.loads(job_hash(r, q, f"repeat:c1:{due}")["opts"])
    assert opts["prevMillis"] == due
    assert opts["repeat"] == {
        "pattern": "*/5 * * * * *",
        "tz": "Europe/Paris",
        "limit": 10,
        "count": 1,
    }
    assert zset(r, q.keys.delayed) == [(f"repeat:c1:{due}", float(due * 4096))]
    assert event_names(r, q) == ["added", "delayed"]


def test_cron_slot_taken_is_minus_10(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A cron iteration id held by a job that cannot be replaced fails (-10)."""
    q = new_queue(redis_url, qname)
    due = (NOW // 5000 + 1) * 5000
    r.hset(q.keys.job(f"repeat:c1:{due}"), mapping={"name": "old", "data": "{}"})
    with pytest.raises(SchedulerConflict):
        upsert(q, "c1", cron="*/5 * * * * *")
    assert not r.exists(q.keys.repeat)


def test_limit_and_end_date(r: redis.Redis, redis_url: str, qname: str) -> None:
    """limit < 1 adds nothing; an end date in the past is refused."""
    q = new_queue(redis_url, qname)
    assert upsert(q, "s1", every_ms=1000, limit=0) is None
    with pytest.raises(ValueError):
        upsert(q, "s1", every_ms=1000, end_date=NOW - 1)
    with pytest.raises(ValueError):
        upsert(q, "s1", every_ms=1000, cron="* * * * *")
    assert not r.exists(q.keys.repeat)
