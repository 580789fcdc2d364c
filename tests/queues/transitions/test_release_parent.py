"""release_parent: the last step of a flow insert frees a parent left with no
pending dependency (all its children existed and were completed)."""

from __future__ import annotations

import redis

from .helpers import NOW, events, lst, new_queue, write_job, zset


def _release(q, parent_id: str) -> int:  # type: ignore[no-untyped-def]
    return int(
        q.scripts.release_parent(
            (q.keys.job(parent_id),), (q.keys.qualified_name, parent_id, NOW)
        )
    )


def test_parent_without_pending_children_goes_to_wait(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """No pending dependency: the parent moves to the wait tail with the base
    marker and `waiting {prev=waiting-children}`; returns 1."""
    q = new_queue(redis_url, qname)
    write_job(r, q, "p")
    r.zadd(q.keys.waiting_children, {"p": NOW})
    assert _release(q, "p") == 1
    assert lst(r, q.keys.wait) == ["p"]
    assert not r.exists(q.keys.waiting_children)
    assert events(r, q)[-1] == {
        "event": "waiting",
        "jobId": "p",
        "prev": "waiting-children",
    }


def test_delayed_parent_goes_to_delayed(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A parent with a delay is scored due*4096 from now and emits `delayed`."""
    q = new_queue(redis_url, qname)
    write_job(r, q, "p", delay=500)
    r.zadd(q.keys.waiting_children, {"p": NOW})
    assert _release(q, "p") == 1
    assert zset(r, q.keys.delayed) == [("p", float((NOW + 500) * 4096))]
    assert events(r, q)[-1] == {
        "event": "delayed",
        "jobId": "p",
        "delay": str(NOW + 500),
    }


def test_pending_child_keeps_the_parent(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """With a pending dependency, or when not in waiting-children, nothing moves."""
    q = new_queue(redis_url, qname)
    write_job(r, q, "p")
    r.zadd(q.keys.waiting_children, {"p": NOW})
    r.sadd(q.keys.dependencies("p"), q.keys.job("c"))
    assert _release(q, "p") == 0
    write_job(r, q, "x")
    assert _release(q, "x") == 0
    assert zset(r, q.keys.waiting_children) == [("p", float(NOW))]
    assert not r.exists(q.keys.wait, q.keys.events)


def test_failed_attachment_keeps_the_parent(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """`flowAttachmentFailed` (a child belonged to another parent) keeps the
    parent waiting and is cleared."""
    q = new_queue(redis_url, qname)
    write_job(r, q, "p", flowAttachmentFailed="1")
    r.zadd(q.keys.waiting_children, {"p": NOW})
    assert _release(q, "p") == 0
    assert not r.hexists(q.keys.job("p"), "flowAttachmentFailed")
    assert zset(r, q.keys.waiting_children) == [("p", float(NOW))]
