"""add_parent_job (docs/protocol.md §4.4): the parent of a flow waits in
`waiting-children`; its children, added in the same transaction, fill
`{parent}:dependencies`."""

from __future__ import annotations

import redis

from queues import codec, ops
from queues.flow import add_flows

from .helpers import NOW, events, job_hash, lst, markers, new_queue, zset


def _flow(q, tree):  # type: ignore[no-untyped-def]
    """Add a flow with every node in `q`'s queue, at NOW."""
    return q.drive(add_flows([tree], lambda name, prefix: q, "bull", NOW))[0]


def test_parent_waits_for_children(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The parent hash is stored like any job, scored in waiting-children at its
    timestamp with `added` then `waiting-children`; it gets no marker and is not
    in wait. Each child carries parentKey and parent JSON and its full key is in
    the parent's dependencies."""
    q = new_queue(redis_url, qname)
    tree = _flow(
        q,
        {
            "name": "p",
            "queue_name": qname,
            "data": {"p": 1},
            "opts": {"job_id": "root"},
            "children": [{"name": "c", "queue_name": qname, "opts": {"job_id": "kid"}}],
        },
    )
    assert tree.job.id == "root"
    h = job_hash(r, q, "root")
    assert set(h) == {"name", "data", "opts", "timestamp", "delay", "priority"}
    assert h["data"] == '{"p":1}'
    assert zset(r, q.keys.waiting_children) == [("root", float(NOW))]
    assert lst(r, q.keys.wait) == ["kid"]
    assert markers(r, q) == {"0": 0.0}
    assert r.smembers(q.keys.dependencies("root")) == {q.keys.job("kid")}
    kid = job_hash(r, q, "kid")
    assert kid["parentKey"] == q.keys.job("root")
    assert codec.loads(kid["parent"]) == {
        "id": "root",
        "queueKey": q.keys.qualified_name,
    }
    assert codec.loads(kid["opts"])["parent"] == {
        "id": "root",
        "queue": q.keys.qualified_name,
    }
    assert [e for e in events(r, q) if e["jobId"] == "root"] == [
        {"event": "added", "jobId": "root", "name": "p"},
        {"event": "waiting-children", "jobId": "root"},
    ]


def test_nodes_without_ids_get_uuids(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Flow nodes without job_id get UUIDs (BullMQ 6), not counter ids, and no
    `jobId` in their opts; the id counter still advances per add."""
    q = new_queue(redis_url, qname)
    tree = _flow(
        q,
        {
            "name": "p",
            "queue_name": qname,
            "children": [{"name": "c", "queue_name": qname}],
        },
    )
    for node in (tree, tree.children[0]):
        assert len(node.job.id) == 36 and node.job.id.count("-") == 4
        assert "jobId" not in codec.loads(job_hash(r, q, node.job.id)["opts"])
    assert r.get(q.keys.id) == "2"


def test_parent_that_is_a_child(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A middle node is a parent (waiting-children) and a child: it is in its
    own parent's dependencies and has its own."""
    q = new_queue(redis_url, qname)
    _flow(
        q,
        {
            "name": "a",
            "queue_name": qname,
            "opts": {"job_id": "a"},
            "children": [
                {
                    "name": "b",
                    "queue_name": qname,
                    "opts": {"job_id": "b"},
                    "children": [
                        {"name": "c", "queue_name": qname, "opts": {"job_id": "c"}}
                    ],
                }
            ],
        },
    )
    assert {m for m, _ in zset(r, q.keys.waiting_children)} == {"a", "b"}
    assert r.smembers(q.keys.dependencies("a")) == {q.keys.job("b")}
    assert r.smembers(q.keys.dependencies("b")) == {q.keys.job("c")}
    assert job_hash(r, q, "b")["parentKey"] == q.keys.job("a")
    assert lst(r, q.keys.wait) == ["c"]


def test_missing_parent_is_minus_5(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A node whose parentKey does not exist returns -5 and stores nothing, not
    even an id counter step."""
    q = new_queue(redis_url, qname)
    call = ops.add_call(
        q.keys,
        "c",
        "{}",
        {"attempts": 0, "delay": 0},
        NOW,
        {
            "parentKey": q.keys.job("ghost"),
            "parent": codec.dumps({"id": "ghost", "queueKey": q.keys.qualified_name}),
        },
        waiting_children=True,
    )
    assert q.scripts.add_parent_job(call.keys, call.args) == -5
    assert not r.exists(q.keys.id, q.keys.waiting_children)


def test_existing_child_joins_the_new_parent(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A child whose custom id exists is not stored again (`duplicated`): a
    pending one is added to the new parent's dependencies and gets its
    parent fields; a completed one counts as processed at once, and
    release_parent then frees a parent left with no pending child."""
    q = new_queue(redis_url, qname)
    q.add("w", {}, job_id="waiting-kid", timestamp=NOW)
    q.add("d", {}, job_id="done-kid", timestamp=NOW)
    r.lrem(q.keys.wait, 0, "done-kid")
    r.zadd(q.keys.completed, {"done-kid": NOW})
    r.hset(q.keys.job("done-kid"), "returnvalue", '"ok"')
    _flow(
        q,
        {
            "name": "p",
            "queue_name": qname,
            "opts": {"job_id": "p1"},
            "children": [
                {"name": "w", "queue_name": qname, "opts": {"job_id": "waiting-kid"}}
            ],
        },
    )
    assert r.smembers(q.keys.dependencies("p1")) == {q.keys.job("waiting-kid")}
    assert job_hash(r, q, "waiting-kid")["parentKey"] == q.keys.job("p1")
    _flow(
        q,
        {
            "name": "p",
            "queue_name": qname,
            "opts": {"job_id": "p2"},
            "children": [
                {"name": "d", "queue_name": qname, "opts": {"job_id": "done-kid"}}
            ],
        },
    )
    assert r.hgetall(q.keys.processed("p2")) == {q.keys.job("done-kid"): '"ok"'}
    assert not r.exists(q.keys.dependencies("p2"))
    assert "p2" in lst(r, q.keys.wait)
    assert [m for m, _ in zset(r, q.keys.waiting_children)] == ["p1"]
    dup = [e["jobId"] for e in events(r, q) if e["event"] == "duplicated"]
    assert dup == ["waiting-kid", "done-kid"]


def test_child_of_another_live_parent_is_minus_7(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Re-using a child id that belongs to another live parent fails with -7;
    the new parent is marked so release_parent leaves it in waiting-children."""
    q = new_queue(redis_url, qname)
    _flow(
        q,
        {
            "name": "p",
            "queue_name": qname,
            "opts": {"job_id": "p1"},
            "children": [{"name": "c", "queue_name": qname, "opts": {"job_id": "c"}}],
        },
    )
    try:
        _flow(
            q,
            {
                "name": "p",
                "queue_name": qname,
                "opts": {"job_id": "p2"},
                "children": [
                    {"name": "c", "queue_name": qname, "opts": {"job_id": "c"}}
                ],
            },
        )
    except Exception as exc:  # noqa: BLE001 - the flow raises for code -7
        assert "another parent" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected the -7 error")
    assert job_hash(r, q, "c")["parentKey"] == q.keys.job("p1")
    assert {m for m, _ in zset(r, q.keys.waiting_children)} == {"p1", "p2"}
    assert "flowAttachmentFailed" not in job_hash(r, q, "p2")


def test_children_in_other_queues(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A child in another queue is stored and enqueued there; parent JSON names
    the parent's queue key."""
    q = new_queue(redis_url, qname)
    other = new_queue(redis_url, qname + "x")
    queues = {qname: q, qname + "x": other}
    tree = q.drive(
        add_flows(
            [
                {
                    "name": "p",
                    "queue_name": qname,
                    "opts": {"job_id": "p"},
                    "children": [
                        {
                            "name": "c",
                            "queue_name": qname + "x",
                            "opts": {"job_id": "c"},
                        }
                    ],
                }
            ],
            lambda name, prefix: queues[name],
            "bull",
            NOW,
        )
    )[0]
    assert tree.children[0].job.queue is other
    assert lst(r, other.keys.wait) == ["c"]
    assert codec.loads(job_hash(r, other, "c")["parent"])["queueKey"] == (
        q.keys.qualified_name
    )
    assert r.smembers(q.keys.dependencies("p")) == {other.keys.job("c")}
