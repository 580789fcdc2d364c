"""BullMQ 6.7.0 parity of the dashboard's job verbs (dashboard/shared/verbs.py)
that had no Node counterpart checked: Change priority, through the one
declaration as the job page and the API run it (one loaded job) and as
selections and batches run it (many ids), leaves the Redis state Node's
`job.changePriority({priority, lifo})` leaves; a Duplicate leaves the state a
Node `queue.add(name, data, opts)` with the kept options leaves."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import redis

from dashboard.shared import verbs
from gpu_workers import Fleet
from queues import Queue

from .parity import assert_same, run_both


def _where(q: Queue) -> verbs.Where:
    return verbs.Where(q, Fleet(q.client))


def test_change_priority(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Prioritized, waiting and delayed jobs, with and without lifo: the
    `prioritized` scores, the `pc` counter, `wait`, the marker and each
    job's `priority` field are Node's."""
    setup = [
        ["add", qname, "a", {"priority": 3}],
        ["add", qname, "b", {"priority": 3}],
        ["add", qname, "c", {}],
        ["add", qname, "d", {}],
        ["add", qname, "f", {}],
        ["add", qname, "e", {"priority": 2, "delay": 60_000}],
    ]
    changes: list[tuple[str, dict[str, Any]]] = [
        ("a", {"priority": 1, "lifo": False}),
        ("b", {"priority": 5, "lifo": True}),
        ("c", {"priority": 0, "lifo": True}),
        ("d", {"priority": 2, "lifo": False}),
        ("f", {"priority": 0, "lifo": False}),
        ("e", {"priority": 7, "lifo": False}),
    ]
    node_op = [["changePriority", qname, i, opts] for i, opts in changes]
    verb = verbs.VERBS["priority"]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        where = _where(queue(qname))
        done: list[Any] = []
        for job_id, opts in changes[:3]:  # the job page's and the API's way
            done.append(verbs.run_on_job(where, verb, job_id, opts, 64).message)
        for job_id, opts in changes[3:]:  # a selection's or a batch's way
            state = where.queue.get_job_state(job_id).value
            done += verb.on_ids(where, [(job_id, state)], opts)
        return done

    node_state, py_state, _, py_results = run_both(r, redis_url, setup, node_op, py_op)
    assert py_results[3:] == [True, True, True]
    prioritized = node_state[f"bull:{qname}:prioritized"][1]
    assert [m for m, _ in prioritized] == ["a", "d", "b"]
    assert node_state[f"bull:{qname}:e"][1]["priority"] == "7"
    assert_same(node_state, py_state)  # DBG


def test_duplicate(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A copy of a delayed job with a priority and retry options, and of one
    with lifo and keep options (one loaded job, then many ids): the new
    jobs' hashes, the lists they join and the events are those of Node's
    add with the options a duplicate keeps (not the delay, nor the id)."""
    kept_a = {
        "priority": 2,
        "attempts": 3,
        "backoff": {"type": "fixed", "delay": 500},
        "removeOnComplete": 10,
    }
    kept_b = {"lifo": True, "removeOnFail": True, "keepLogs": 5, "stackTraceLimit": 3}
    setup = [
        [
            "addJob",
            qname,
            "render",
            {"prompt": "a cat"},
            {"jobId": "A", "delay": 60_000, **kept_a},
        ],
        ["addJob", qname, "embed", {"n": [1, 2]}, {"jobId": "B", **kept_b}],
    ]
    node_op = [
        ["addJob", qname, "render", {"prompt": "a cat"}, kept_a],
        ["addJob", qname, "embed", {"n": [1, 2]}, kept_b],
    ]
    verb = verbs.VERBS["duplicate"]

    def py_op(queue: Callable[[str], Queue]) -> list[Any]:
        where = _where(queue(qname))
        first = verbs.run_on_job(where, verb, "A", {}, 64).new_id
        return [first, *verb.on_ids(where, [("B", "waiting")], {})]

    node_state, py_state, node_ids, py_results = run_both(
        r, redis_url, setup, node_op, py_op
    )
    assert py_results == [node_ids[0], True]
    assert_same(_opts_read(node_state), _opts_read(py_state))


def _opts_read(state: dict[str, Any]) -> dict[str, Any]:
    """Job hashes with `opts` as the object it holds: Node and `Queue.add`
    write its keys in another order, and `Queue.add` writes a zero `delay`
    that Node leaves out (BullMQ reads a missing delay as 0)."""
    out = dict(state)
    for key, (kind, value) in state.items():
        if kind == "hash" and "opts" in value:
            opts = json.loads(value["opts"])
            if opts.get("delay") == 0:
                del opts["delay"]
            out[key] = (kind, {**value, "opts": opts})
    return out
