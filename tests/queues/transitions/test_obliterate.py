"""obliterate (docs/protocol.md §4.17): Queue.obliterate."""

from __future__ import annotations

import pytest
import redis

from queues.exceptions import QueueHasActiveJobs
from queues.queue import Queue

from .helpers import (
    NOW,
    add_active,
    entry,
    move_to_active,
    move_to_finished,
    new_queue,
    queue_keys,
    write_job,
)


def _fill(r: redis.Redis, q: Queue) -> None:
    """One job in every structure, plus queue-level keys."""
    add_active(q)
    q.add("c", timestamp=NOW)
    move_to_active(q, seq=1)
    move_to_finished(q, [entry("2", token="w1:1")])
    q.get_job("1").log("line")
    q.add("w", timestamp=NOW)
    q.add("p", priority=2, timestamp=NOW)
    q.add("d", delay=1_000, timestamp=NOW)
    write_job(r, q, "legacy")
    r.lpush(q.keys.paused, "legacy")
    write_job(r, q, "f")
    r.zadd(q.keys.failed, {"f": NOW})
    r.zadd(q.keys.repeat, {"s1": NOW})
    r.hset(q.keys.repeat + ":s1", "name", "x")
    r.set(q.keys.stalled_check, NOW)
    r.sadd(q.keys.stalled, "1")


def test_refuses_active_jobs_without_force(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """With active jobs and no force it returns -2 (QueueHasActiveJobs) after pausing;
    no job is deleted."""
    q = new_queue(redis_url, qname)
    _fill(r, q)
    with pytest.raises(QueueHasActiveJobs):
        q.obliterate()
    assert r.hget(q.keys.meta, "paused") == "1"
    assert r.exists(q.keys.job("1"), q.keys.job("3"), q.keys.job("f")) == 3


def test_script_requires_pause(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Called on a running queue the script returns -1 and deletes nothing."""
    q = new_queue(redis_url, qname)
    q.add("x", timestamp=NOW)
    assert q.scripts.obliterate((q.keys.meta, q.keys.base), (1000, "")) == -1
    assert r.exists(q.keys.job("1")) == 1


def test_force_deletes_everything(r: redis.Redis, redis_url: str, qname: str) -> None:
    """With force every job (with its lock and logs), every structure and the
    queue-level keys (meta, events, id, pc, marker, stalled...) are deleted."""
    q = new_queue(redis_url, qname)
    _fill(r, q)
    other = new_queue(redis_url, qname + "x")
    other.add("keep", timestamp=NOW)
    q.obliterate(force=True)
    assert queue_keys(r, q) == set()
    assert r.exists(other.keys.job("1")) == 1


def test_batches(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The script deletes at most `count` jobs per call and returns 1 while work
    remains, 0 when done."""
    q = new_queue(redis_url, qname)
    for _ in range(5):
        q.add("x", timestamp=NOW)
    q.pause()
    call = (q.keys.meta, q.keys.base)
    assert q.scripts.obliterate(call, (2, "")) == 1
    assert r.llen(q.keys.wait) == 3
    assert r.exists(*(q.keys.job(str(n)) for n in range(1, 6))) == 3
    assert q.scripts.obliterate(call, (2, "")) == 1
    assert q.scripts.obliterate(call, (2, "")) == 0
    assert queue_keys(r, q) == set()
