"""Interop point 2: jobs produced by Bullpen, processed by a Node BullMQ
worker; Node sees them as if Node had added them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from queues import Queue
from tests.helpers import wait_until

from .helpers import call, node, node_worker
from .jobs import check_order, mixed_jobs, py_kwargs

COUNT = 1000
#: What Node's Job exposes about how a job was added.
ADD_FIELDS = ("name", "data", "priority", "delay")


def _as_added(job: dict[str, Any]) -> dict[str, Any]:
    """Node's view of a job's add-time fields; opts without `timestamp` and
    without the `delay: 0` Python BullMQ (and Bullpen) always writes."""
    view = {k: job[k] for k in ADD_FIELDS}
    opts = dict(job["opts"])
    opts.pop("timestamp", None)
    if opts.get("delay") == 0:
        del opts["delay"]
    view["opts"] = opts
    return view


def test_python_producer_node_worker(redis_url: str, qname: str) -> None:
    """1,000 Bullpen jobs (the mix of point 1) run once each on a Node worker in
    BullMQ's order; Node reads data, opts, priority, delay, attempts and backoff
    exactly as for the same jobs added by Node itself."""
    specs = mixed_jobs(COUNT, seed=11)
    queue = Queue(qname, redis_url)
    jobs = queue.add_bulk(
        {"name": s["name"], "data": s["data"], "opts": py_kwargs(s["opts"])}
        for s in specs
    )
    ids = [j.id for j in jobs]
    removed = {
        i for i, s in zip(ids, specs, strict=True) if s["opts"].get("removeOnComplete")
    }
    fail_first = {
        i for i, s in zip(ids, specs, strict=True) if s["data"].get("failFirst")
    }

    # Node's own view of the same adds, on a twin queue, before anything runs.
    added = call(redis_url, qname + "-node", "addBulk", specs[:60])
    twins = node(redis_url, "read", qname + "-node", [j["id"] for j in added])
    mine = node(redis_url, "read", qname, ids[:60])
    for py_job, node_job in zip(mine, twins, strict=True):
        assert _as_added(py_job) == _as_added(node_job), py_job["id"]
        assert py_job["opts"]["attempts"] == node_job["opts"]["attempts"]

    worker = node_worker(redis_url, qname, name="node", concurrency=1)
    try:
        wait_until(
            lambda: len(worker.seen("start")) >= COUNT + len(fail_first),
            90,
            what="the Node worker to run every job",
        )
        wait_until(
            lambda: queue.get_counts("completed")["completed"] == COUNT - len(removed),
            30,
            what="every completion",
        )
    finally:
        worker.stop()
    starts = [(ln["start"], ln["attemptsMade"]) for ln in worker.seen("start")]
    runs = Counter(job_id for job_id, _ in starts)
    assert set(runs) == set(ids)
    assert all(runs[i] == (2 if i in fail_first else 1) for i in ids)
    check_order(specs, ids, starts)
    assert queue.get_counts() == {
        "active": 0,
        "completed": COUNT - len(removed),
        "delayed": 0,
        "failed": 0,
        "prioritized": 0,
        "waiting": 0,
        "waiting-children": 0,
    }
    for job_id, spec in zip(ids, specs, strict=True):
        job = queue.get_job(job_id)
        if job_id in removed:
            assert job is None
            continue
        assert job.returnvalue == {
            "id": job_id,
            "by": "node",
            "double": 2 * spec["data"]["n"],
        }
        assert job.attempts_made == (2 if job_id in fail_first else 1)
    queue.close()


def test_the_tenant_option_survives_a_node_worker(redis_url: str, qname: str) -> None:
    """`opts.tenant` (who queued the job, for GPU-time accounting; not
    BullMQ's) is kept by a Node worker through a failed attempt, its retry and
    the completion: Node reads it, and so does Bullpen afterwards."""
    queue = Queue(qname, redis_url)
    job = queue.add(
        "tenanted",
        {"n": 4, "failFirst": True},
        attempts=2,
        backoff={"type": "fixed", "delay": 10},
        tenant="acme-render",
    )
    worker = node_worker(redis_url, qname, name="node", concurrency=1)
    try:
        wait_until(
            lambda: queue.get_counts("completed")["completed"] == 1,
            30,
            what="the job to complete on Node after its retry",
        )
    finally:
        worker.stop()
    [seen] = node(redis_url, "read", qname, [job.id])
    assert seen["opts"]["tenant"] == "acme-render" and seen["attemptsMade"] == 2
    done = queue.get_job(job.id)
    assert done.opts["tenant"] == "acme-render"
    assert done.returnvalue == {"id": job.id, "by": "node", "double": 8}
    queue.close()
