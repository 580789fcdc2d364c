"""Interop point 3: the events stream read across languages: Node's
QueueEvents hears a Bullpen worker, Bullpen's QueueEvents hears a Node one."""

from __future__ import annotations

import time
from typing import Any

from queues import Queue, QueueEvents
from queues.codec import dumps
from tests.helpers import wait_until
from tests.queues.transitions.helpers import claim_keys

from .helpers import call, node_events, node_worker, python_worker


def _events(proc: Any, name: str, job_id: str | None = None) -> list[Any]:
    return [
        ln["args"]
        for ln in proc.seen("event", name)
        if job_id is None
        or (isinstance(ln["args"], dict) and ln["args"].get("jobId") == job_id)
    ]


def test_node_queue_events_hear_python_workers(redis_url: str, qname: str) -> None:
    """Node QueueEvents gets active, progress (number and object), completed
    (returnvalue parsed), failed (raw failedReason), retries-exhausted,
    stalled, delayed, waiting, removed and drained from a Bullpen worker and
    queue, with the fields Node expects."""
    queue = Queue(qname, redis_url)
    listener = node_events(redis_url, qname)
    try:
        stalled = queue.add("s", {"n": 2})
        # A worker that took `s` and died: locked for 100 ms, never renewed.
        queue.scripts.move_to_active(
            claim_keys(queue.keys),
            (
                queue.keys.base,
                int(time.time() * 1000),
                dumps({"token": "dead", "seq": 0, "lockDuration": 100}),
                1,
            ),
        )
        progress = queue.add("p", {"progress": [42, {"stage": "resize", "pct": 50}]})
        failing = queue.add("f", {"fail": "raw reason: boom"}, attempts=2)
        delayed = queue.add("d", {"n": 1}, delay=100)
        doomed = queue.add("r", {}, delay=60_000)
        assert queue.remove_job(doomed.id) is True
        with python_worker(redis_url, qname, stalled_interval=300):
            wait_until(
                lambda: (
                    _events(listener, "drained")
                    and queue.get_counts("completed")["completed"] == 3
                ),
                30,
                what="every job to finish and the queue to drain",
            )
    finally:
        listener.stop()

    assert {"jobId": progress.id, "prev": "waiting"} in _events(listener, "active")
    assert [e["data"] for e in _events(listener, "progress", progress.id)] == [
        42,
        {"stage": "resize", "pct": 50},
    ]
    done = _events(listener, "completed", progress.id)
    assert done == [
        {
            "jobId": progress.id,
            "prev": "active",
            "returnvalue": {"id": progress.id, "by": "py", "double": 0},
        }
    ]
    assert _events(listener, "waiting", failing.id)[-1] == {
        "jobId": failing.id,
        "prev": "active",
    }
    assert _events(listener, "failed", failing.id) == [
        {"jobId": failing.id, "failedReason": "raw reason: boom", "prev": "active"}
    ]
    assert _events(listener, "retries-exhausted", failing.id) == [
        {"jobId": failing.id, "attemptsMade": "2"}
    ]
    due = _events(listener, "delayed", delayed.id)[0]["delay"]
    assert isinstance(due, int) and due == delayed.timestamp + 100
    assert {"jobId": delayed.id, "prev": "delayed"} in _events(
        listener, "waiting", delayed.id
    )
    assert _events(listener, "removed", doomed.id) == [
        {"jobId": doomed.id, "prev": "delayed"}
    ]
    assert _events(listener, "stalled", stalled.id) == [{"jobId": stalled.id}]
    assert _events(listener, "completed", stalled.id)
    queue.close()


def test_python_queue_events_hear_node_workers(redis_url: str, qname: str) -> None:
    """Bullpen's QueueEvents parses a Node worker's progress data and return
    value from JSON, keeps failedReason raw, and reads attemptsMade as int."""
    events = QueueEvents(qname, redis_url, last_id="0-0", block_ms=200)
    ok = call(redis_url, qname, "add", "ok", {"n": 4, "progress": [7, {"a": [1]}]})
    bad = call(
        redis_url, qname, "add", "bad", {"fail": "node says no"}, {"attempts": 1}
    )
    worker = node_worker(redis_url, qname, name="node")
    seen: list[Any] = []
    try:

        def finished() -> bool:
            seen.extend(events.read())
            return any(e.event == "drained" for e in seen)

        wait_until(finished, 30, what="the Node worker to drain the queue")
    finally:
        worker.stop()
        events.close()
    by = {(e.event, e.job_id): e for e in seen}
    assert [
        e.fields["data"] for e in seen if e.event == "progress" and e.job_id == ok["id"]
    ] == [7, {"a": [1]}]
    assert by[("completed", ok["id"])].fields == {
        "returnvalue": {"id": ok["id"], "by": "node", "double": 8},
        "prev": "active",
    }
    assert by[("failed", bad["id"])].fields == {
        "failedReason": "node says no",
        "prev": "active",
    }
    assert by[("retries-exhausted", bad["id"])].fields == {"attemptsMade": 1}
    assert by[("active", ok["id"])].fields == {"prev": "waiting"}
    assert ("added", ok["id"]) in by and ("waiting", ok["id"]) in by
