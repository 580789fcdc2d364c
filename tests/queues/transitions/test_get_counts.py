"""get_counts (docs/protocol.md §4.18): Queue.get_counts."""

from __future__ import annotations

import redis

from .helpers import (
    NOW,
    add_active,
    entry,
    lst,
    move_to_active,
    move_to_finished,
    new_queue,
)


def test_counts_per_state(r: redis.Redis, redis_url: str, qname: str) -> None:
    """LLEN for wait/active, ZCARD for the sets; defaults are Node's set (no paused)."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.add("c", timestamp=NOW)
    move_to_finished(q, [entry("1")])
    q.add("w", timestamp=NOW)
    q.add("p", priority=1, timestamp=NOW)
    q.add("d", delay=10, timestamp=NOW)
    r.zadd(q.keys.failed, {"f": NOW})
    r.zadd(q.keys.waiting_children, {"wc": NOW})
    move_to_active(q, seq=1)
    assert q.get_counts() == {
        "active": 1,
        "completed": 1,
        "delayed": 1,
        "failed": 1,
        "prioritized": 1,
        "waiting": 1,
        "waiting-children": 1,
    }
    assert q.get_counts("wait", "prioritized") == {"waiting": 1, "prioritized": 1}


def test_waiting_includes_legacy_paused_list(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """`waiting` counts the legacy `paused` list too; `paused` alone counts only it."""
    q = new_queue(redis_url, qname)
    q.add("w", timestamp=NOW)
    r.lpush(q.keys.paused, "a", "b")
    assert q.get_counts("waiting") == {"waiting": 3}
    assert q.get_counts("paused") == {"paused": 2}


def test_legacy_tail_marker_is_discounted_and_popped(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A legacy "0:" marker at the tail of wait is not counted and is RPOPed; a list
    holding only the marker counts 0 and is left alone (as BullMQ's getCounts)."""
    q = new_queue(redis_url, qname)
    q.add("w", timestamp=NOW)
    r.rpush(q.keys.wait, "0:0")
    assert q.get_counts("waiting") == {"waiting": 1}
    assert lst(r, q.keys.wait) == ["1"]
    r.rpush(q.keys.paused, "0:5")
    assert q.get_counts("paused") == {"paused": 0}
    assert lst(r, q.keys.paused) == ["0:5"]


def test_active_is_plain_llen(r: redis.Redis, redis_url: str, qname: str) -> None:
    """`active` is a plain LLEN (no marker handling)."""
    q = new_queue(redis_url, qname)
    r.rpush(q.keys.active, "1", "0:x")
    assert q.get_counts("active") == {"active": 2}
