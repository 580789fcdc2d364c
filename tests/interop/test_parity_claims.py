"""BullMQ 6.7.0 parity of claiming (issue 11, section 1): each scenario runs
once with Node BullMQ workers and once with Bullpen workers, and the
resulting queue state must be the same."""

from __future__ import annotations

import time
from typing import Any

from queues import Queue
from queues.connection import sync_from_url
from tests.helpers import wait_until

from .helpers import Process, call, node, node_worker, py_worker

KINDS = ("node", "bullpen")


def _worker(kind: str, redis_url: str, queue: str, name: str) -> Process:
    """A worker process of either language, blocking at most 1 s when idle."""
    if kind == "node":
        return node_worker(redis_url, queue, name=name, drainDelay=1)
    return py_worker(redis_url, queue, worker_name=name, drain_delay=1)


def _deferred_failure_then_job(redis_url: str, qname: str, kind: str) -> dict[str, Any]:
    """A parent whose fpof child failed (so it carries `defa`) waits ahead of
    a plain job in a queue limited to 1 start per minute; a worker fails the
    parent and then starts the plain job. The state after at most 8 s."""
    parents, children = qname + kind + "p", qname + kind + "c"
    flow = node(
        redis_url,
        "flow",
        {
            "name": "parent",
            "queueName": parents,
            "data": {"parent": True},
            "children": [
                {
                    "name": "bad",
                    "queueName": children,
                    "data": {"fail": "child broke"},
                    "opts": {"failParentOnFailure": True},
                }
            ],
        },
    )
    parent_id, child_id = flow["job"]["id"], flow["children"][0]["job"]["id"]
    queue = Queue(parents, redis_url)
    child_worker = _worker(kind, redis_url, children, kind)
    wait_until(
        lambda: queue.get_job(parent_id).get_state() == "waiting",
        15,
        what="the failed child to release its parent",
    )
    child_worker.stop()
    call(redis_url, parents, "setGlobalRateLimit", 1, 60_000)
    real = queue.add("real", {"n": 1})
    worker = _worker(kind, redis_url, parents, kind)
    deadline = time.time() + 8
    while time.time() < deadline and real.get_state() != "completed":
        time.sleep(0.05)
    worker.stop()
    parent = queue.get_job(parent_id)
    child_key = f"{children}:{child_id}"
    client = sync_from_url(redis_url, decode_responses=True)
    state = {
        "parent": parent.get_state(),
        "parent_reason": parent.failed_reason.replace(child_key, "<child>"),
        "real": real.get_state(),
        "limiter_count": client.get(queue.keys.limiter),
    }
    client.close()
    queue.close()
    return state


def test_deferred_failure_uses_no_rate_limit_slot(redis_url: str, qname: str) -> None:
    """Failing a job that carries a deferred failure (`defa`) does not count
    against the global rate limit (6.7.0 prepareJobForProcessing): with one
    start per minute the next real job still runs at once, and the limiter
    counts that job only."""
    states = {k: _deferred_failure_then_job(redis_url, qname, k) for k in KINDS}
    assert states["node"] == states["bullpen"], states
    assert states["bullpen"]["real"] == "completed"
    assert states["bullpen"]["limiter_count"] == "1"


def _most_at_once(jobs: list[Any], slack_ms: int = 10) -> int:
    """The most jobs active at one time, from processedOn/finishedOn. Each
    worker takes `now` before its call reaches Redis, so a job claimed just
    after another finished may carry a processedOn a few ms before that
    finishedOn; `slack_ms` (well under the jobs' 40 ms) absorbs that."""
    edges = sorted(
        [(j.finished_on, -1) for j in jobs]
        + [(j.processed_on + slack_ms, 1) for j in jobs]
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def _share_under_global_concurrency(
    redis_url: str, qname: str, kind: str
) -> dict[str, Any]:
    """4 workers (local concurrency 3 each) on a queue with a global
    concurrency of 3 run 48 jobs of 40 ms: who ran how many, and the most
    jobs active at once."""
    queue = Queue(qname + kind, redis_url)
    queue.set_global_concurrency(3)
    names = [f"{kind}{i}" for i in range(4)]
    if kind == "node":
        workers = [
            node_worker(redis_url, queue.name, name=n, concurrency=3, drainDelay=1)
            for n in names
        ]
    else:
        workers = [
            py_worker(
                redis_url, queue.name, worker_name=n, concurrency=3, drain_delay=1
            )
            for n in names
        ]
    queue.add_bulk({"name": "j", "data": {"sleepMs": 40}} for _ in range(48))
    wait_until(
        lambda: queue.get_counts("completed")["completed"] == 48,
        30,
        what=f"48 jobs on {kind} workers",
    )
    for worker in workers:
        worker.stop()
    jobs = queue.get_jobs("completed")
    ran = {n: sum(j.processed_by == n for j in jobs) for n in names}
    queue.close()
    return {"ran": ran, "most_at_once": _most_at_once(jobs)}


def test_global_concurrency_is_shared_by_workers(redis_url: str, qname: str) -> None:
    """With a global concurrency of 3 and 4 workers that could each take 3
    jobs, the cap holds and every worker gets a real share of the work, as
    with Node workers (one job per claim); a Bullpen worker used to claim
    every free slot in one call and keep them through finish-and-claim."""
    shares = {k: _share_under_global_concurrency(redis_url, qname, k) for k in KINDS}
    for share in shares.values():
        assert share["most_at_once"] <= 3, shares
        assert sum(share["ran"].values()) == 48, shares
    assert min(shares["bullpen"]["ran"].values()) >= 48 // 4 // 3, shares
