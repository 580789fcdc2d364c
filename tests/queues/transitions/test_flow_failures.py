"""move_to_finished for flow children (docs/protocol.md §4.7 step 9): what a child's
`parent` flags (fpof, cpof, idof, rdof) do to its parent when it fails."""

from __future__ import annotations

from typing import Any

import redis

from queues.flow import add_flows

from .helpers import (
    NOW,
    claimed,
    entry,
    job_hash,
    lst,
    move_to_active,
    move_to_finished,
    new_queue,
    zset,
)

LATER = NOW + 1000


def _family(r: redis.Redis, q: Any, **flags: Any) -> None:
    """Parent `p` with children `a` (given flags) and `b`; `a` is claimed."""
    q.drive(
        add_flows(
            [
                {
                    "name": "p",
                    "queue_name": q.name,
                    "opts": {"job_id": "p"},
                    "children": [
                        {
                            "name": "a",
                            "queue_name": q.name,
                            "opts": {"job_id": "a", **flags},
                        },
                        {"name": "b", "queue_name": q.name, "opts": {"job_id": "b"}},
                    ],
                }
            ],
            lambda name, prefix: q,
            "bull",
            NOW,
        )
    )
    r.lrem(q.keys.wait, 0, "b")
    assert claimed(move_to_active(q))[0][0] == "a"


def _fail_a(q: Any) -> None:
    assert move_to_finished(q, [entry("a", "failed", "boom")], now=LATER)[0] == [0]


def test_no_flag_keeps_parent_blocked(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A failed child without a flag stays a pending dependency."""
    q = new_queue(redis_url, qname)
    _family(r, q)
    _fail_a(q)
    assert q.keys.job("a") in r.smembers(q.keys.dependencies("p"))
    assert zset(r, q.keys.waiting_children) == [("p", float(NOW))]


def test_fail_parent_on_failure(r: redis.Redis, redis_url: str, qname: str) -> None:
    """fpof: the child moves to `:unsuccessful`, the parent gets `defa` and is
    released at once (a worker then fails it), other children still pending."""
    q = new_queue(redis_url, qname)
    _family(r, q, fail_parent_on_failure=True)
    _fail_a(q)
    assert zset(r, q.keys.unsuccessful("p")) == [(q.keys.job("a"), float(LATER))]
    assert job_hash(r, q, "p")["defa"] == f"child {q.keys.job('a')} failed"
    assert lst(r, q.keys.wait) == ["p"]
    assert r.smembers(q.keys.dependencies("p")) == {q.keys.job("b")}


def test_continue_parent_on_failure(r: redis.Redis, redis_url: str, qname: str) -> None:
    """cpof: the failure goes to `:failed` and the parent is released now."""
    q = new_queue(redis_url, qname)
    _family(r, q, continue_parent_on_failure=True)
    _fail_a(q)
    assert r.hgetall(q.keys.failed_children("p")) == {q.keys.job("a"): "boom"}
    assert lst(r, q.keys.wait) == ["p"]
    assert "defa" not in job_hash(r, q, "p")


def test_ignore_dependency_on_failure(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """idof: the failure goes to `:failed`; the parent waits for the others."""
    q = new_queue(redis_url, qname)
    _family(r, q, ignore_dependency_on_failure=True)
    _fail_a(q)
    assert r.hgetall(q.keys.failed_children("p")) == {q.keys.job("a"): "boom"}
    assert r.smembers(q.keys.dependencies("p")) == {q.keys.job("b")}
    assert zset(r, q.keys.waiting_children) == [("p", float(NOW))]


def test_remove_dependency_on_failure(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """rdof: the dependency is dropped without a trace; once the last child
    completes the parent runs and sees only that child's value."""
    q = new_queue(redis_url, qname)
    _family(r, q, remove_dependency_on_failure=True)
    _fail_a(q)
    assert not r.exists(q.keys.failed_children("p"))
    r.rpush(q.keys.wait, "b")
    move_to_active(q, now=LATER, token="w2")
    move_to_finished(q, [entry("b", value='"B"', token="w2:0")], now=LATER)
    assert lst(r, q.keys.wait) == ["p"]
    assert q.get_job("p").get_children_values() == {q.keys.job("b"): "B"}
    assert q.get_job("p").get_dependencies() == {
        "processed": {q.keys.job("b"): "B"},
        "unprocessed": [],
        "failed": [],
        "ignored": {},
    }
