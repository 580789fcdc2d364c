"""Interop point 4: Node and Bullpen workers on one queue: exactly-once
processing, a global rate limit, pause and resume, worker listing."""

from __future__ import annotations

import base64
import time
from collections import Counter

import pytest

from queues import Queue
from tests.helpers import wait_until

from .helpers import call, node, node_worker, py_worker, python_worker

JOBS = 5000


@pytest.mark.slow  # load/soak: make test runs it, make test-fast does not
def test_two_node_two_python_workers_share_5000_jobs(
    redis_url: str, qname: str
) -> None:
    """Two Node and two Bullpen worker processes drain 5,000 jobs (half added by
    each side): every job runs and completes exactly once, both languages take
    a share, and Node's getWorkers() lists all four by name."""
    queue = Queue(qname, redis_url)
    workers = [
        node_worker(redis_url, qname, name=f"node{i}", concurrency=8) for i in (1, 2)
    ]
    workers += [
        py_worker(redis_url, qname, worker_name=f"py{i}", concurrency=8) for i in (1, 2)
    ]
    try:
        encoded = base64.b64encode(qname.encode()).decode()
        listed = wait_until(
            lambda: len(found := call(redis_url, qname, "getWorkers")) == 4 and found,
            15,
            what="Node's getWorkers() to list the four workers",
        )
        assert sorted(w["rawname"] for w in listed) == sorted(
            f"bull:{encoded}:w:{n}" for n in ("node1", "node2", "py1", "py2")
        )
        assert {w["name"] for w in listed} == {qname}
        half = JOBS // 2
        call(
            redis_url,
            qname,
            "addBulk",
            [{"name": "n", "data": {"n": i}} for i in range(half)],
        )
        queue.add_bulk({"name": "p", "data": {"n": i}} for i in range(half, JOBS))
        wait_until(
            lambda: queue.get_counts("completed")["completed"] == JOBS,
            120,
            what=f"{JOBS} completions",
        )
    finally:
        for w in workers:
            w.stop()
    starts = Counter(ln["start"] for w in workers for ln in w.seen("start"))
    assert len(starts) == JOBS and set(starts.values()) == {1}, "each job runs once"
    by_side = Counter(ln["by"] for w in workers for ln in w.seen("done"))
    assert sum(by_side.values()) == JOBS
    assert (
        by_side["node1"] + by_side["node2"] > 0 and by_side["py1"] + by_side["py2"] > 0
    )
    assert queue.get_counts("completed", "failed", "active", "waiting") == {
        "completed": JOBS,
        "failed": 0,
        "active": 0,
        "waiting": 0,
    }
    queue.close()


def test_global_rate_limit_set_from_node(redis_url: str, qname: str) -> None:
    """A global rate limit set with Node's setGlobalRateLimit(10, 400) holds
    for two Bullpen workers together: split into BullMQ's fixed windows (one
    opens at the first start after the previous one expired), no window holds
    more than 10 starts, so 60 jobs take at least five windows."""
    limit, window_ms, count = 10, 400, 60
    call(redis_url, qname, "setGlobalRateLimit", limit, window_ms)
    queue = Queue(qname, redis_url)
    queue.add_bulk({"name": "r", "data": {"n": i}} for i in range(count))
    with (
        python_worker(redis_url, qname, "pya", concurrency=4),
        python_worker(redis_url, qname, "pyb", concurrency=4),
    ):
        wait_until(
            lambda: queue.get_counts("completed")["completed"] == count,
            30,
            what="the rate-limited jobs",
        )
    starts = sorted(j.processed_on for j in queue.get_jobs("completed"))
    windows: list[list[int]] = []
    for at in starts:
        # 30 ms of slack for the client clock (processedOn) vs Redis's PEXPIRE.
        if windows and at < windows[-1][0] + window_ms - 30:
            windows[-1].append(at)
        else:
            windows.append([at])
    assert max(len(w) for w in windows) <= limit, [len(w) for w in windows]
    assert starts[-1] - starts[0] >= (count // limit - 1) * window_ms * 0.9
    assert {j.processed_by for j in queue.get_jobs("completed")} == {"pya", "pyb"}
    queue.close()


def test_pause_and_resume_across_languages(redis_url: str, qname: str) -> None:
    """Pausing from Bullpen stops a Node worker taking jobs and resuming starts
    it again; pausing from Node stops a Bullpen worker, resuming restarts it."""
    queue = Queue(qname, redis_url)
    worker = node_worker(redis_url, qname, name="node", drainDelay=1)
    try:
        queue.pause()
        assert call(redis_url, qname, "isPaused") is True
        queue.add_bulk({"name": "a", "data": {"n": i}} for i in range(20))
        time.sleep(1.5)
        assert worker.seen("start") == []
        assert queue.get_counts("waiting")["waiting"] == 20
        queue.resume()
        wait_until(
            lambda: len(worker.seen("done")) == 20, 15, what="the Node worker to resume"
        )
    finally:
        worker.stop()

    call(redis_url, qname, "pause")
    assert queue.is_paused() is True
    call(
        redis_url,
        qname,
        "addBulk",
        [{"name": "b", "data": {"n": i}} for i in range(20)],
    )
    with python_worker(redis_url, qname, drain_delay=1) as record:
        time.sleep(1.5)
        assert record.starts == []
        assert queue.get_counts("waiting")["waiting"] == 20
        call(redis_url, qname, "resume")
        wait_until(
            lambda: queue.get_counts("completed")["completed"] == 40,
            15,
            what="the Bullpen worker to resume",
        )
    assert len(record.starts) == 20
    assert node(redis_url, "call", qname, "getJobCounts", []) == {
        "active": 0,
        "completed": 40,
        "delayed": 0,
        "failed": 0,
        "prioritized": 0,
        "waiting": 0,
        "waiting-children": 0,
    }
    queue.close()
