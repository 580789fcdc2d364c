"""Queue default job options merge as Node BullMQ 6.7.0's `defaultJobOptions`:
the same defaults and per-job options give the same stored opts."""

from __future__ import annotations

from typing import Any

from queues import Queue

from .helpers import node

NODE_DEFAULTS = {
    "attempts": 3,
    "backoff": {"type": "exponential", "delay": 5000, "jitter": 0.5},
    "removeOnComplete": {"age": 3600},
    "removeOnFail": {"age": 86400},
    "priority": 2,
}
PY_DEFAULTS = {
    "attempts": 3,
    "backoff": {"type": "exponential", "delay": 5000, "jitter": 0.5},
    "remove_on_complete": {"age": 3600},
    "remove_on_fail": {"age": 86400},
    "priority": 2,
}
#: (Node job opts, the same as Bullpen keyword options)
CASES = [
    ({}, {}),
    ({"backoff": {"type": "fixed", "delay": 10}}, {"backoff": 10}),
    ({"attempts": 1, "priority": 7}, {"attempts": 1, "priority": 7}),
    (
        {"removeOnComplete": True, "lifo": True},
        {"remove_on_complete": True, "lifo": True},
    ),
]
COMPARED = (
    "attempts",
    "backoff",
    "removeOnComplete",
    "removeOnFail",
    "priority",
    "lifo",
)


def _opts(job: dict[str, Any]) -> dict[str, Any]:
    return {k: job["opts"].get(k) for k in COMPARED}


def test_defaults_merge_as_node_does(redis_url: str, qname: str) -> None:
    """For each case, Node reads the same opts (and priority) from the job
    Bullpen added as from the one Node added with the same queue defaults."""
    queue_opts = {"defaultJobOptions": NODE_DEFAULTS}
    node_ids = [
        node(redis_url, "call", qname, "add", ["j", {}, node_opts], queue_opts)["id"]
        for node_opts, _ in CASES
    ]
    with Queue(qname, redis_url, default_job_options=PY_DEFAULTS) as q:
        py_ids = [str(q.add("j", {}, **kwargs).id) for _, kwargs in CASES]
    jobs = node(redis_url, "read", qname, node_ids + py_ids)
    by_node, by_py = jobs[: len(CASES)], jobs[len(CASES) :]
    for case, a, b in zip(CASES, by_node, by_py, strict=True):
        assert _opts(b) == _opts(a), case
        assert b["priority"] == a["priority"], case
