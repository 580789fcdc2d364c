"""BullMQ 6.7.0 parity of retry (priority jobs, flow children): each scenario is
run once by Node BullMQ and once by Bullpen and the whole Redis state compared
(tests/interop/parity.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import redis

from queues import Queue
from queues.ops import now_ms
from tests.queues.transitions.helpers import move_stalled

from .parity import Steps, assert_same, node_steps, run_both


# --- 1. Job.retry / Queue.retry_jobs of jobs with a priority -----------------
def _priority_setup(q: str) -> Steps:
    """Failed `a` (priority 3) and `l` (lifo), completed `k` (priority 2), then
    waiting `b` (priority 3), `c` (priority 1) and plain `d`."""
    return [
        ["add", q, "a", {"priority": 3}],
        ["add", q, "l", {"lifo": True}],
        ["add", q, "k", {"priority": 2}],
        [
            "take",
            q,
            {"l": ["fail", "boom"], "k": ["complete", "v"], "a": ["fail", "boom"]},
        ],
        ["add", q, "b", {"priority": 3}],
        ["add", q, "c", {"priority": 1}],
        ["add", q, "d", {}],
    ]


def test_retry_of_priority_jobs(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Job.retry of a failed or completed job with a priority puts it back in
    `prioritized` with a new `pc` counter (behind `b` of the same priority),
    a lifo one at the tail of `wait`: the same state as 6.7.0."""
    setup = _priority_setup(qname)
    node_op = [
        ["retry", qname, "a", "failed"],
        ["retry", qname, "l", "failed"],
        ["retry", qname, "k", "completed"],
    ]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        q = queue(qname)
        return [
            q.get_job(i).retry(s)
            for i, s in (("a", "failed"), ("l", "failed"), ("k", "completed"))
        ]

    node_state, py_state, _, _ = run_both(r, redis_url, setup, node_op, py_op)
    prioritized = f"bull:{qname}:prioritized"
    assert [m for m, _ in node_state[prioritized][1]] == ["c", "k", "b", "a"]
    assert node_state[f"bull:{qname}:wait"][1] == ["d", "l"]
    assert_same(node_state, py_state)


def test_retry_jobs_of_priority_jobs(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Queue.retry_jobs moves failed and completed jobs to `wait` whatever
    their priority, as 6.7.0's moveJobsToWait does."""
    setup = _priority_setup(qname)
    node_op = [
        ["retryJobs", qname, {"state": "failed"}],
        ["retryJobs", qname, {"state": "completed"}],
    ]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        q = queue(qname)
        return [q.retry_jobs("failed"), q.retry_jobs("completed")]

    node_state, py_state, _, _ = run_both(r, redis_url, setup, node_op, py_op)
    assert sorted(node_state[f"bull:{qname}:wait"][1]) == ["a", "d", "k", "l"]
    assert_same(node_state, py_state)


def test_promote_of_priority_job(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Job.promote of a delayed job with a priority queues it in `prioritized`
    (new `pc`), behind waiting jobs of its priority, as 6.7.0's promote does."""
    setup = [
        ["add", qname, "a", {"priority": 2, "delay": 60_000}],
        ["add", qname, "b", {"priority": 2}],
        ["add", qname, "c", {}],
    ]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        return [queue(qname).get_job("a").promote()]

    node_state, py_state, _, _ = run_both(
        r, redis_url, setup, [["promote", qname, "a"]], py_op
    )
    prioritized = node_state[f"bull:{qname}:prioritized"][1]
    assert [m for m, _ in prioritized] == ["b", "a"]
    assert_same(node_state, py_state)


def test_stalled_priority_job(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A stalled job with a priority goes back to the tail of `wait` (to run
    next), not to `prioritized`, as 6.7.0's moveStalledJobsToWait does."""
    setup = [
        ["add", qname, "a", {"priority": 3}],
        ["add", qname, "b", {"priority": 3}],
        ["add", qname, "c", {}],
        ["take", qname, {"c": ["complete", 1], "a": ["hold"]}],
        ["del", f"bull:{qname}:a:lock"],
        ["stalledCheck", qname],
        ["del", f"bull:{qname}:stalled-check"],
    ]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        return move_stalled(queue(qname), now=now_ms())

    node_state, py_state, _, py_results = run_both(
        r, redis_url, setup, [["stalledCheck", qname]], py_op
    )
    assert py_results == ["a"]
    assert node_state[f"bull:{qname}:wait"][1] == ["a"]
    assert_same(node_state, py_state)


# --- 2. retry of flow children --------------------------------------------
def _children_setup(q: str) -> Steps:
    """Parent `P` (queue q) over children in q+"b": `ok` completed, `bad`
    (idof), `gone` (rdof) and `doom` (fpof) failed; `keep` (queue q+"c")
    still pending."""
    b, c = q + "b", q + "c"
    return [
        [
            "flow",
            {
                "name": "P",
                "queueName": q,
                "opts": {"jobId": "P"},
                "children": [
                    {"name": "ok", "queueName": b, "opts": {"jobId": "ok"}},
                    {
                        "name": "bad",
                        "queueName": b,
                        "opts": {"jobId": "bad", "ignoreDependencyOnFailure": True},
                    },
                    {
                        "name": "gone",
                        "queueName": b,
                        "opts": {"jobId": "gone", "removeDependencyOnFailure": True},
                    },
                    {
                        "name": "doom",
                        "queueName": b,
                        "opts": {"jobId": "doom", "failParentOnFailure": True},
                    },
                    {"name": "keep", "queueName": c, "opts": {"jobId": "keep"}},
                ],
            },
        ],
        [
            "take",
            b,
            {
                "ok": ["complete", "v1"],
                "bad": ["fail", "e1"],
                "gone": ["fail", "e2"],
                "doom": ["fail", "e3"],
            },
        ],
    ]


def _rerun(q: str) -> Steps:
    """The retried children run again, this time completing."""
    outcomes = {i: ["complete", f"{i}-2"] for i in ("ok", "bad", "gone", "doom")}
    return [["take", q + "b", outcomes]]


@pytest.mark.parametrize("how", ["retry_jobs", "job_retry"])
def test_retried_children_rejoin_their_parent(
    r: redis.Redis, redis_url: str, qname: str, how: str
) -> None:
    """Retrying failed and completed flow children (in bulk or one by one)
    makes them pending dependencies of their parent again (except the rdof
    one, which the parent dropped); when they complete the parent records
    their new values: the same state as 6.7.0."""
    b = qname + "b"
    setup = _children_setup(qname)
    ids = [("bad", "failed"), ("gone", "failed"), ("doom", "failed")]
    ids.append(("ok", "completed"))
    node_op: Steps
    if how == "retry_jobs":
        node_op = [
            ["retryJobs", b, {"state": "failed"}],
            ["retryJobs", b, {"state": "completed"}],
        ]
    else:
        node_op = [["retry", b, i, s] for i, s in ids]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        q = queue(b)
        if how == "retry_jobs":
            return [q.retry_jobs("failed"), q.retry_jobs("completed")]
        return [q.get_job(i).retry(s) for i, s in ids]

    def then_rerun(queue: Callable[[str], Queue]) -> list[Any]:
        results = py_op(queue)
        return results + node_steps(redis_url, _rerun(qname))

    node_state, py_state, _, _ = run_both(
        r, redis_url, setup, node_op + _rerun(qname), then_rerun
    )
    processed = node_state[f"bull:{qname}:P:processed"][1]
    assert processed == {
        f"bull:{b}:{i}": json.dumps(f"{i}-2") for i in ("ok", "bad", "doom")
    }
    assert node_state[f"bull:{qname}:P:dependencies"][1] == [f"bull:{qname}c:keep"]
    assert_same(node_state, py_state)


# --- 3. removal of a flow parent -------------------------------------------
