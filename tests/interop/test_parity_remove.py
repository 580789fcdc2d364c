"""BullMQ 6.7.0 parity of removal (flow parents and their children, bulk
removals): each scenario is run once by Node BullMQ and once by Bullpen and the
whole Redis state compared (tests/interop/parity.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from queues import Queue
from queues.exceptions import JobLocked

from .parity import Steps, assert_same, run_both


def _family_setup(q: str) -> Steps:
    """`G` (queue q) over `P` and a pending `sib`; `P` over `done` (q+"b",
    completed), `bad` (q+"b", idof, failed), `mid` (q) over a pending `leaf`
    (q+"c"), and a pending `todo` (q)."""
    b, c = q + "b", q + "c"
    return [
        [
            "flow",
            {
                "name": "G",
                "queueName": q,
                "opts": {"jobId": "G"},
                "children": [
                    {
                        "name": "P",
                        "queueName": q,
                        "opts": {"jobId": "P"},
                        "children": [
                            {"name": "done", "queueName": b, "opts": {"jobId": "done"}},
                            {
                                "name": "bad",
                                "queueName": b,
                                "opts": {
                                    "jobId": "bad",
                                    "ignoreDependencyOnFailure": True,
                                },
                            },
                            {
                                "name": "mid",
                                "queueName": q,
                                "opts": {"jobId": "mid"},
                                "children": [
                                    {
                                        "name": "leaf",
                                        "queueName": c,
                                        "opts": {"jobId": "leaf"},
                                    }
                                ],
                            },
                            {"name": "todo", "queueName": q, "opts": {"jobId": "todo"}},
                        ],
                    },
                    {"name": "sib", "queueName": q, "opts": {"jobId": "sib"}},
                ],
            },
        ],
        ["take", b, {"done": ["complete", "v"], "bad": ["fail", "e"]}],
    ]


def _without_release_of_removed_parents(state: dict[str, Any]) -> dict[str, Any]:
    """6.7.0's state with its one documented difference undone: when the last
    pending child of a parent being removed goes, 6.7.0 first moves that parent
    to `wait` (a `waiting {prev=waiting-children}` event) and then removes it
    from there (`removed {prev=wait}`); Bullpen removes it straight from
    waiting-children (docs/bullmq-compat.md)."""
    out = dict(state)
    for key, (kind, value) in state.items():
        if kind != "stream":
            continue
        removed = {e.get("jobId") for e in value if e["event"] == "removed"}
        released = {
            e["jobId"]
            for e in value
            if e["event"] == "waiting"
            and e.get("prev") == "waiting-children"
            and e.get("jobId") in removed
        }
        events = []
        for e in value:
            if e.get("jobId") in released and e["event"] == "waiting":
                continue
            if e.get("jobId") in released and e["event"] == "removed":
                e = {**e, "prev": "waiting-children"}
            events.append(e)
        out[key] = (kind, events)
    return out


@pytest.mark.parametrize("how", ["queue", "job"])
def test_remove_parent_removes_its_children(
    r: redis.Redis, redis_url: str, qname: str, how: str
) -> None:
    """Queue.remove_job / Job.remove of a parent removes, across the queues of
    the prefix, every child it lists (completed, ignored failure, pending,
    grandchildren): the same keys, sets and `removed` events as 6.7.0, but for
    the documented release of the parent on its way out."""
    setup = _family_setup(qname)
    kind = "remove" if how == "queue" else "jobRemove"
    node_op = [[kind, qname, "P", {}]]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        q = queue(qname)
        return [q.remove_job("P") if how == "queue" else q.get_job("P").remove()]

    node_state, py_state, node_results, py_results = run_both(
        r, redis_url, setup, node_op, py_op
    )
    assert node_results == [1 if how == "queue" else "removed"]
    assert py_results == [True]
    jobs = {"P", "done", "bad", "mid", "leaf", "todo"}
    for key in node_state:
        assert key.split(":")[2] not in jobs, key
    assert node_state[f"bull:{qname}:G:dependencies"][1] == [f"bull:{qname}:sib"]
    assert_same(_without_release_of_removed_parents(node_state), py_state)


def test_remove_released_parent_is_exact(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A parent whose children all finished (so it waits to run) is removed
    with its whole finished tree exactly as 6.7.0 does."""
    b, c = qname + "b", qname + "c"
    setup = [
        [
            "flow",
            {
                "name": "P",
                "queueName": qname,
                "opts": {"jobId": "P", "priority": 4},
                "children": [
                    {"name": "done", "queueName": b, "opts": {"jobId": "done"}},
                    {
                        "name": "mid",
                        "queueName": b,
                        "opts": {"jobId": "mid"},
                        "children": [
                            {"name": "leaf", "queueName": c, "opts": {"jobId": "leaf"}}
                        ],
                    },
                ],
            },
        ],
        ["take", c, {"leaf": ["complete", 1]}],
        ["take", b, {"done": ["complete", 2], "mid": ["complete", 3]}],
    ]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        return [queue(qname).remove_job("P")]

    node_state, py_state, _, _ = run_both(
        r, redis_url, setup, [["remove", qname, "P", {}]], py_op
    )
    assert not [k for k in node_state if k.split(":")[2] in {"P", "done", "mid"}]
    assert_same(node_state, py_state)


def test_remove_without_children(r: redis.Redis, redis_url: str, qname: str) -> None:
    """remove_children=False removes the parent alone, as removeChildren:
    false does."""
    setup = _family_setup(qname)

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        return [queue(qname).remove_job("P", remove_children=False)]

    node_state, py_state, _, _ = run_both(
        r,
        redis_url,
        setup,
        [["remove", qname, "P", {"removeChildren": False}]],
        py_op,
    )
    assert node_state[f"bull:{qname}:todo"][1]["parentKey"] == f"bull:{qname}:P"
    assert_same(node_state, py_state)


def test_locked_pending_descendant_refuses_removal(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """With an active (locked) grandchild the removal is refused and nothing
    changes (6.7.0 returns 0; Bullpen raises JobLocked)."""
    setup = _family_setup(qname)
    setup.append(["take", qname + "c", {"leaf": ["hold"]}])

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        with pytest.raises(JobLocked):
            queue(qname).remove_job("P")
        return [0]

    node_state, py_state, node_results, _ = run_both(
        r, redis_url, setup, [["remove", qname, "P", {}]], py_op
    )
    assert node_results == [0]
    assert f"bull:{qname}:P" in node_state
    assert_same(node_state, py_state)


def test_removing_last_child_releases_parent_by_priority(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Removing the last pending child of a parent with a priority releases
    the parent to `prioritized`, as a finishing child does; 6.7.0's removeJob
    pushes it to `wait` whatever its priority (a documented difference). All
    else (events, marker, the child's keys) is the same."""
    setup = [
        [
            "flow",
            {
                "name": "P",
                "queueName": qname,
                "opts": {"jobId": "P", "priority": 2},
                "children": [{"name": "c", "queueName": qname, "opts": {"jobId": "c"}}],
            },
        ],
    ]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        return [queue(qname).remove_job("c")]

    node_state, py_state, _, _ = run_both(
        r, redis_url, setup, [["remove", qname, "c", {}]], py_op
    )
    wait, prioritized = f"bull:{qname}:wait", f"bull:{qname}:prioritized"
    assert node_state[wait][1] == ["P"] and prioritized not in node_state
    assert py_state[prioritized][1] == [("P", 2 * 2**32 + 1)] and wait not in py_state
    differ = {wait, prioritized, f"bull:{qname}:pc"}
    assert_same(
        {k: v for k, v in node_state.items() if k not in differ},
        {k: v for k, v in py_state.items() if k not in differ},
    )


# --- 4. bulk removal of a parent's last pending child ------------------------
def _stuck_parents_setup(q: str) -> Steps:
    """Children `c1`, `c2` (queue q) of `P` (q), itself the only child of `G`
    (q); child `c3` (q) of `O` in queue q+"o". All children wait in q."""
    return [
        [
            "flow",
            {
                "name": "G",
                "queueName": q,
                "opts": {"jobId": "G"},
                "children": [
                    {
                        "name": "P",
                        "queueName": q,
                        "opts": {"jobId": "P"},
                        "children": [
                            {"name": "c1", "queueName": q, "opts": {"jobId": "c1"}},
                            {"name": "c2", "queueName": q, "opts": {"jobId": "c2"}},
                        ],
                    }
                ],
            },
        ],
        [
            "flow",
            {
                "name": "O",
                "queueName": q + "o",
                "opts": {"jobId": "O", "priority": 2},
                "children": [{"name": "c3", "queueName": q, "opts": {"jobId": "c3"}}],
            },
        ],
    ]


@pytest.mark.parametrize("how", ["drain", "clean"])
def test_bulk_removal_does_not_strand_parents(
    r: redis.Redis, redis_url: str, qname: str, how: str
) -> None:
    """Draining (or cleaning `wait` of) a queue that holds the last pending
    children of parents does what 6.7.0's "hard" removal does: a parent in the
    same queue is deleted too, and so is its own parent when that was its last
    pending child; a parent in another queue is pushed to its `wait` (whatever
    its priority). None stays in waiting-children for ever."""
    node_op = (
        [["call", qname, "drain", []]]
        if how == "drain"
        else [["call", qname, "clean", [0, 0, "wait"]]]
    )

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        q = queue(qname)
        return [q.drain() if how == "drain" else q.clean(0, 0, "wait")]

    node_state, py_state, _, _ = run_both(
        r, redis_url, _stuck_parents_setup(qname), node_op, py_op
    )
    for job_id in ("G", "P", "c1", "c2", "c3"):
        assert f"bull:{qname}:{job_id}" not in node_state
    assert node_state[f"bull:{qname}o:wait"][1] == ["O"]
    assert_same(node_state, py_state)
