"""remove_job (docs/protocol.md §4.14): Queue.remove_job / Job.remove."""

from __future__ import annotations

import pytest
import redis

from queues import codec
from queues.exceptions import JobLocked, SchedulerIterationError
from queues.flow import add_flows
from queues.queue import Queue

from .helpers import (
    NOW,
    add_active,
    claimed,
    clear_events,
    entry,
    events,
    lst,
    move_to_active,
    move_to_finished,
    new_queue,
    queue_keys,
    write_job,
)

SUBKEYS = ("logs", "dependencies", "processed", "failed", "unsuccessful")


def _with_subkeys(r: redis.Redis, q: Queue, job_id: str) -> None:
    base = q.keys.job(job_id)
    r.rpush(base + ":logs", "l")
    r.sadd(base + ":dependencies", q.keys.job("child"))  # a child in the same slot
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


def _family(r: redis.Redis, q: Queue, b: Queue) -> None:
    """Parent `p` in q over children in q and b: `done` (completed, its value
    processed), `bad` (idof, failed, an ignored failure), `mid` (waiting for
    its own child `leaf`), `todo` (waiting); all in the default prefix."""

    def child(name: str, queue: Queue, **opts: object) -> dict[str, object]:
        return {
            "name": name,
            "queue_name": queue.name,
            "opts": {"job_id": name, **opts},
        }

    queues = {q.name: q, b.name: b}
    tree = {
        "name": "p",
        "queue_name": q.name,
        "opts": {"job_id": "p"},
        "children": [
            child("done", b),
            child("bad", b, ignore_dependency_on_failure=True),
            {**child("mid", q), "children": [child("leaf", b)]},
            child("todo", q),
        ],
    }
    q.drive(add_flows([tree], lambda name, prefix: queues[name], "bull", NOW))
    r.lrem(b.keys.wait, 0, "leaf")
    r.lpush(b.keys.wait, "leaf")
    ids = [i for i, _, _ in claimed(move_to_active(b, count=2))]
    assert sorted(ids) == ["bad", "done"]
    finish = {"done": entry("done", value='"v"'), "bad": entry("bad", "failed", "e")}
    move_to_finished(
        b, [dict(finish[i], token=f"w1:{n}") for n, i in enumerate(ids)], now=NOW + 1
    )
    assert r.zscore(q.keys.waiting_children, "p") is not None


def test_remove_parent_removes_children_across_queues(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Removing a parent removes every child it lists (completed, ignored
    failure, pending, and their own children) in any queue of the prefix, each
    with `removed {prev}` in its own queue, children first; no job key is left
    and the parent is not released on the way (BullMQ 6.7.0 removeChildren)."""
    q, b = new_queue(redis_url, qname), new_queue(redis_url, qname + "b")
    _family(r, q, b)
    clear_events(r, q)
    clear_events(r, b)
    assert q.get_job("p").remove() is True
    jobs = {"p": q, "mid": q, "todo": q, "done": b, "bad": b, "leaf": b}
    left = queue_keys(r, q) | queue_keys(r, b)
    gone = {j.keys.job(i) for i, j in jobs.items()}
    assert not {k for k in left if k in gone or k.rsplit(":", 1)[0] in gone}
    assert not r.exists(q.keys.wait, q.keys.waiting_children, b.keys.wait)
    assert not r.exists(b.keys.completed, b.keys.failed)
    removed_b = [(e["jobId"], e["prev"]) for e in events(r, b)]
    assert sorted(removed_b) == [
        ("bad", "failed"),
        ("done", "completed"),
        ("leaf", "wait"),
    ]
    removed_q = [(e["event"], e["jobId"], e["prev"]) for e in events(r, q)]
    assert sorted(removed_q[:2]) == [
        ("removed", "mid", "waiting-children"),
        ("removed", "todo", "wait"),
    ]
    assert removed_q[2:] == [("removed", "p", "waiting-children")]


def test_remove_without_children_leaves_them(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """remove_children=False removes the parent alone; its children stay where
    they are, still naming the parent."""
    q, b = new_queue(redis_url, qname), new_queue(redis_url, qname + "b")
    _family(r, q, b)
    assert q.remove_job("p", remove_children=False) is True
    assert not r.exists(q.keys.job("p"))
    assert lst(r, q.keys.wait) == ["todo"]
    assert r.zscore(b.keys.completed, "done") is not None
    assert r.hget(b.keys.job("leaf"), "parentKey") == q.keys.job("mid")


def test_locked_pending_grandchild_refuses_whole_removal(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A locked pending descendant (an active grandchild) refuses the removal
    (JobLocked) and nothing is removed."""
    q, b = new_queue(redis_url, qname), new_queue(redis_url, qname + "b")
    _family(r, q, b)
    assert claimed(move_to_active(b))[0][0] == "leaf"
    before = queue_keys(r, q) | queue_keys(r, b)
    clear_events(r, q)
    with pytest.raises(JobLocked):
        q.get_job("p").remove()
    assert queue_keys(r, q) | queue_keys(r, b) == before - {q.keys.events}
    assert q.remove_job("p", remove_children=False) is True


def test_cycle_in_broken_flow_data_is_walked_once(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Two jobs listing each other as pending children (broken data) are both
    removed, each with one `removed` event, instead of recursing for ever."""
    q = new_queue(redis_url, qname)
    for job_id, other in (("a", "b"), ("b", "a")):
        write_job(r, q, job_id)
        r.sadd(q.keys.job(job_id) + ":dependencies", q.keys.job(other))
    r.lpush(q.keys.wait, "a", "b")
    assert q.remove_job("a") is True
    assert not r.exists(q.keys.job("a"), q.keys.job("b"), q.keys.wait)
    assert sorted(e["jobId"] for e in events(r, q)) == ["a", "b"]


def test_bulk_removal_deletes_stranded_parent_and_its_dedup_key(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Draining the last pending child of a same-queue parent deletes the
    parent with the deduplication key that still points to it."""
    q = new_queue(redis_url, qname)
    parent_key = q.keys.job("parent")
    write_job(r, q, "parent", deid="d1")
    r.set(q.keys.base + "de:d1", "parent")
    r.zadd(q.keys.waiting_children, {"parent": NOW})
    write_job(r, q, "child", parentKey=parent_key)
    r.lpush(q.keys.wait, "child")
    r.sadd(parent_key + ":dependencies", q.keys.job("child"))
    assert q.drain() == 1
    assert not r.exists(parent_key, q.keys.waiting_children, q.keys.base + "de:d1")
