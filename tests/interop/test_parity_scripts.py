"""BullMQ 6.7.0 parity of single scripts (issue 11, section 1; the list is in
docs/bullmq-compat.md, "Script-by-script comparison with 6.7.0"): each
scenario runs once with Node BullMQ and once with Bullpen, and the resulting
queue state must be the same."""

from __future__ import annotations

from typing import Any

from queues import Queue
from queues.connection import sync_from_url
from tests.helpers import wait_until

from .helpers import call, node_worker, py_worker

KINDS = ("node", "bullpen")


def _clean_last_scheduler_iteration(
    redis_url: str, qname: str, kind: str
) -> dict[str, Any]:
    """A job scheduler with limit 1 runs its only iteration, which stays the
    scheduler's current one; then `clean(0, 100, "completed")`."""
    queue = Queue(qname + kind, redis_url)
    call(
        redis_url,
        queue.name,
        "upsertJobScheduler",
        "once",
        {"every": 600_000, "limit": 1},
        {"name": "tick", "data": {"n": 1}},
    )
    if kind == "node":
        worker = node_worker(redis_url, queue.name, name=kind, drainDelay=1)
    else:
        worker = py_worker(redis_url, queue.name, worker_name=kind, drain_delay=1)
    wait_until(
        lambda: queue.get_counts("completed")["completed"] == 1,
        15,
        what=f"the iteration on the {kind} worker",
    )
    worker.stop()
    if kind == "node":
        cleaned = call(redis_url, queue.name, "clean", 0, 100, "completed")
    else:
        cleaned = queue.clean(0, 100, "completed")
    client = sync_from_url(redis_url, decode_responses=True)
    state = {
        "cleaned": len(cleaned),
        "counts": queue.get_counts("completed", "delayed", "waiting"),
        "schedulers": client.zcard(queue.keys.repeat),
    }
    client.close()
    queue.close()
    return state


def test_clean_completed_removes_last_scheduler_iteration(
    redis_url: str, qname: str
) -> None:
    """Cleaning `completed` removes a finished iteration even while it is its
    scheduler's current one (6.7.0 checks schedulers only for unfinished
    states), so bull-board's "clean completed" leaves nothing behind."""
    states = {k: _clean_last_scheduler_iteration(redis_url, qname, k) for k in KINDS}
    assert states["node"] == states["bullpen"], states
    assert states["bullpen"]["cleaned"] == 1
