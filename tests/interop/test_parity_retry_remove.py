"""Issue 11 section 1, BullMQ 6.7.0 parity of retry, flow children and removal:
each scenario is set up by Node BullMQ (node/parity.mjs), then the operation
under test is run once by Node BullMQ 6.7.0 and once, on the same set-up, by
Bullpen, and the whole Redis state left behind is compared (every key of the
prefix: lists, sets, scored sets, job hashes, events; only clock readings are
left out)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import redis

from queues import Queue
from queues.exceptions import JobLocked
from queues.ops import now_ms
from tests.queues.transitions.helpers import move_stalled

from .helpers import HERE, port_of

PARITY = HERE / "node" / "parity.mjs"
#: Hash fields holding clock readings, which differ between the two runs, and
#: meta `version`, which a Node Queue stamps when it is created (the Node run
#: creates one for the operation, Bullpen's run does not).
SKIPPED_FIELDS = {"timestamp", "processedOn", "finishedOn", "version"}
#: Scored sets whose scores are not clock readings (the others are compared
#: by members only).
EXACT_SCORES = (":prioritized", ":pc")

Steps = list[list[Any]]
PyOp = Callable[[Callable[[str], Queue]], list[Any]]


def node_steps(redis_url: str, steps: Steps) -> list[Any]:
    """Run parity.mjs steps with Node BullMQ; each step's result."""
    done = subprocess.run(
        ["node", str(PARITY), port_of(redis_url), json.dumps(steps)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HERE,
    )
    if done.returncode != 0:
        raise AssertionError(f"parity.mjs failed:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines() if line]


def snapshot(r: redis.Redis) -> dict[str, Any]:
    """Every key of the `bull` prefix with its value, clock readings left out."""
    state: dict[str, Any] = {}
    for key in sorted(r.scan_iter(match="bull:*", count=1000)):
        kind = r.type(key)
        value: Any
        if kind == "hash":
            value = {k: v for k, v in r.hgetall(key).items() if k not in SKIPPED_FIELDS}
        elif kind == "list":
            value = r.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(r.smembers(key))
        elif kind == "zset":
            pairs = r.zrange(key, 0, -1, withscores=True)
            if key.endswith(":marker"):  # "1" is scored by a due time
                value = [(m, "<time>" if m == "1" else s) for m, s in pairs]
            elif key.endswith(EXACT_SCORES):
                value = pairs
            else:  # clock scores: which members, not their order
                value = sorted(m for m, _ in pairs)
        elif kind == "stream":  # a `delayed` event's `delay` is a due time
            value = [
                {k: "<time>" if k == "delay" else v for k, v in fields.items()}
                for _, fields in r.xrange(key)
            ]
        elif key.endswith(":stalled-check"):
            value = "<time>"
        else:
            value = r.get(key)
        state[key] = (kind, value)
    return state


def run_both(
    r: redis.Redis,
    redis_url: str,
    setup: Steps,
    node_op: Steps,
    py_op: PyOp,
) -> tuple[dict[str, Any], dict[str, Any], list[Any], list[Any]]:
    """(Node state, Bullpen state, Node results, Bullpen results) after the
    same set-up followed by the operation done by each."""
    r.flushall()
    node_results = node_steps(redis_url, setup + node_op)[len(setup) :]
    node_state = snapshot(r)
    r.flushall()
    node_steps(redis_url, setup)
    queues: dict[str, Queue] = {}

    def queue(name: str) -> Queue:
        if name not in queues:
            queues[name] = Queue(name, redis_url)
        return queues[name]

    try:
        py_results = py_op(queue)
    finally:
        for q in queues.values():
            q.close()
    return node_state, snapshot(r), node_results, py_results


def assert_same(node_state: dict[str, Any], py_state: dict[str, Any]) -> None:
    """The two states are equal, key by key (a readable diff on failure)."""
    assert sorted(py_state) == sorted(node_state)
    for key in node_state:
        assert (key, py_state[key]) == (key, node_state[key])


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
