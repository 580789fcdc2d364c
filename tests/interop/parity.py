"""Parity scaffolding (BullMQ 6.7.0): each scenario is set up by Node BullMQ
(node/parity.mjs), then the operation under test is run once by Node BullMQ
6.7.0 and once, on the same set-up, by Bullpen, and the whole Redis state left
behind is compared (every key of the prefix: lists, sets, scored sets, job
hashes, events; only clock readings are left out)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import redis

from queues import Queue

from .helpers import HERE, redis_arg

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
        ["node", str(PARITY), redis_arg(redis_url), json.dumps(steps)],
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
