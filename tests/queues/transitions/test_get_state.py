"""get_state (docs/protocol.md §4.18): Queue.get_job_state / Job.get_state."""

from __future__ import annotations

import pytest
import redis

from queues.state import JobState

from .helpers import NOW, add_active, new_queue


@pytest.mark.parametrize(
    "key,state",
    [
        ("completed", JobState.COMPLETED),
        ("failed", JobState.FAILED),
        ("delayed", JobState.DELAYED),
        ("prioritized", JobState.PRIORITIZED),
        ("active", JobState.ACTIVE),
        ("wait", JobState.WAITING),
        ("paused", JobState.WAITING),
        ("waiting-children", JobState.WAITING_CHILDREN),
    ],
)
def test_each_structure(
    r: redis.Redis, redis_url: str, qname: str, key: str, state: JobState
) -> None:
    """Each structure maps to its state; the legacy `paused` list reads as waiting."""
    q = new_queue(redis_url, qname)
    if key in ("active", "wait", "paused"):
        r.rpush(q.keys.base + key, "other", "j")
    else:
        r.zadd(q.keys.base + key, {"j": NOW})
    assert q.get_job_state("j") is state


def test_unknown(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A job in no structure is unknown."""
    q = new_queue(redis_url, qname)
    assert q.get_job_state("nope") is JobState.UNKNOWN


def test_check_order(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The sets are checked before the lists (completed wins over active)."""
    q = new_queue(redis_url, qname)
    r.zadd(q.keys.completed, {"j": NOW})
    r.lpush(q.keys.active, "j")
    r.zadd(q.keys.waiting_children, {"k": NOW})
    r.lpush(q.keys.wait, "k")
    assert q.get_job_state("j") is JobState.COMPLETED
    assert q.get_job_state("k") is JobState.WAITING


def test_through_the_api(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Jobs moved by the transitions report the state they are in."""
    q = new_queue(redis_url, qname)
    add_active(q)
    assert q.get_job("1").get_state() is JobState.ACTIVE
    assert q.add("w", timestamp=NOW).get_state() is JobState.WAITING
    assert q.add("p", priority=1, timestamp=NOW).get_state() is JobState.PRIORITIZED
    assert q.add("d", delay=9, timestamp=NOW).get_state() is JobState.DELAYED


def test_a_deep_waiting_job_is_read_without_scanning_the_list(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """In a backlog longer than the look near both ends (1,000 each), a job
    in the middle is waiting; an id whose hash does not exist is unknown, and
    so is a stored job found in no structure while `wait` is short enough to
    have been looked at whole. A stored job in no structure in a long
    backlog reads as waiting (docs/protocol.md §4.18)."""
    q = new_queue(redis_url, qname)
    ids = [f"j{i}" for i in range(3000)]
    r.rpush(q.keys.wait, *ids)
    for jid in ("j0", "j1500", "j2999"):
        r.hset(q.keys.job(jid), "name", "x")
        assert q.get_job_state(jid) is JobState.WAITING
    assert q.get_job_state("j1501") is JobState.UNKNOWN  # no hash
    r.hset(q.keys.job("stray"), "name", "x")
    assert q.get_job_state("stray") is JobState.WAITING
    r.ltrim(q.keys.wait, 0, 1999)
    assert q.get_job_state("stray") is JobState.UNKNOWN
    assert q.get_job_state("j1500") is JobState.WAITING
