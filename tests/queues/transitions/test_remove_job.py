"""remove_job (wire spec 4.14): Queue.remove_job / Job.remove."""

from __future__ import annotations

import pytest
import redis

from queues import codec
from queues.exceptions import JobLocked, SchedulerIterationError
from queues.queue import Queue

from .helpers import (
    NOW,
    add_active,
    clear_events,
    entry,
    events,
    lst,
    move_to_finished,
    new_queue,
    queue_keys,
    write_job,
)

SUBKEYS = ("logs", "dependencies", "processed", "failed", "unsuccessful")


def _with_subkeys(r: redis.Redis, q: Queue, job_id: str) -> None:
    base = q.keys.job(job_id)
    r.rpush(base + ":logs", "l")
    r.sadd(base + ":dependencies", "x")
    r.hset(base + ":processed", "x", "1")
    r.hset(base + ":failed", "x", "e")
    r.zadd(base + ":unsuccessful", {"x": 1})


@pytest.mark.parametrize(
    "state,prev",
    [
        ("wait", "wait"),
        ("prioritized", "prioritized"),
        ("delayed", "delayed"),
        ("completed", "completed"),
        ("failed", "failed"),
        ("paused", "paused"),
        ("waiting-children", "waiting-children"),
        ("active", "active"),
    ],
)
def test_remove_from_each_state(
    r: redis.Redis, redis_url: str, qname: str, state: str, prev: str
) -> None:
    """The id leaves its structure, the hash and sub-keys are deleted, and
    `removed {prev=<state>}` is emitted."""
    q = new_queue(redis_url, qname)
    write_job(r, q, "j")
    key = q.keys.base + state
    if state in ("wait", "paused", "active"):
        r.lpush(key, "j")
    else:
        r.zadd(key, {"j": NOW})
    _with_subkeys(r, q, "j")
    assert q.remove_job("j") is True
    assert not r.exists(
        key, q.keys.job("j"), *(q.keys.job("j") + ":" + s for s in SUBKEYS)
    )
    assert events(r, q) == [{"event": "removed", "jobId": "j", "prev": prev}]


def test_remove_nowhere(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A job hash in no structure is deleted with `prev=unknown`; a missing job is
    reported as False with no event."""
    q = new_queue(redis_url, qname)
    write_job(r, q, "orphan")
    assert q.get_job("orphan").remove() is True
    assert events(r, q) == [{"event": "removed", "jobId": "orphan", "prev": "unknown"}]
    clear_events(r, q)
    assert q.remove_job("orphan") is False
    assert not r.exists(q.keys.events)


def test_locked_job_is_not_removed(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A job whose lock exists is refused (0 -> JobLocked) and left as it is."""
    q = new_queue(redis_url, qname)
    add_active(q)
    clear_events(r, q)
    with pytest.raises(JobLocked):
        q.remove_job("1")
    assert lst(r, q.keys.active) == ["1"]
    assert r.exists(q.keys.job("1")) == 1
    assert not r.exists(q.keys.events)


def test_current_scheduler_iteration(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The current iteration of a job scheduler gives -8 (SchedulerIterationError);
    an older iteration can be removed."""
    q = new_queue(redis_url, qname)
    millis = NOW + 60_000
    r.zadd(q.keys.repeat, {"nightly": millis})
    current = f"repeat:nightly:{millis}"
    old = f"repeat:nightly:{NOW}"
    write_job(r, q, current, rjk="nightly")
    write_job(r, q, old, rjk="nightly")
    r.zadd(q.keys.delayed, {current: millis * 4096})
    r.zadd(q.keys.completed, {old: NOW})
    with pytest.raises(SchedulerIterationError):
        q.remove_job(current)
    assert r.zscore(q.keys.delayed, current) is not None
    assert q.remove_job(old) is True


def test_last_pending_child_releases_parent(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Removing a parent's last pending child moves the parent from
    waiting-children to wait with `waiting {prev=waiting-children}`."""
    q = new_queue(redis_url, qname)
    parent_key = q.keys.job("parent")
    write_job(r, q, "parent")
    r.zadd(q.keys.waiting_children, {"parent": NOW})
    write_job(
        r,
        q,
        "child",
        parentKey=parent_key,
        parent=codec.dumps({"id": "parent", "queueKey": q.keys.qualified_name}),
    )
    r.lpush(q.keys.wait, "child")
    r.sadd(parent_key + ":dependencies", q.keys.job("child"))
    q.remove_job("child")
    assert not r.exists(parent_key + ":dependencies", q.keys.waiting_children)
    assert lst(r, q.keys.wait) == ["parent"]
    assert events(r, q) == [
        {"event": "waiting", "jobId": "parent", "prev": "waiting-children"},
        {"event": "removed", "jobId": "child", "prev": "wait"},
    ]


def test_removed_job_leaves_no_keys(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A finished job with logs leaves nothing behind but queue-level keys."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.get_job("1").log("x")
    move_to_finished(q, [entry("1")])
    q.remove_job("1")
    assert not {k for k in queue_keys(r, q) if k.startswith(q.keys.job("1"))}
