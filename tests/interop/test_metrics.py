"""Worker metrics and the worker listing across languages: a series written
by Node workers with `metrics: {maxDataPoints}` reads the same from Bullpen's
get_metrics as from Node's getMetrics, and the reverse; Node's getWorkers()
and Bullpen's get_workers() list the same mixed set of workers."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import redis

from queues import MetricsOptions, Queue
from tests.helpers import wait_until

from .helpers import call, node_events, node_worker, py_worker, python_worker

MINUTE_MS = 60_000
MAX_POINTS = 5
OK_JOBS = 5
FAILING_JOBS = 2
#: The series after OK_JOBS completions and FAILING_JOBS failures on top of
#: `seed()`, all within one minute (prevTS is that minute's first finish).
#: completed: the minute closed 3 minutes ago held 3 jobs (count 4 - prevCount
#: 1), then two empty minutes. failed: 100 minutes ago, capped at MAX_POINTS
#: points, which pushes the older ones out.
EXPECTED: dict[str, dict[str, Any]] = {
    "completed": {"count": 9, "prevCount": 4, "data": [0, 0, 3, 1]},
    "failed": {"count": 12, "prevCount": 10, "data": [0, 0, 0, 0, 2]},
}


def minute_with_room(room_s: float = 25) -> int:
    """Now in ms, once at least `room_s` seconds of the current minute are
    left (so the jobs of a test all finish in one minute)."""
    left = 60 - time.time() % 60
    if left < room_s:
        time.sleep(left + 0.2)
    return int(time.time() * 1000)


def seed(r: redis.Redis, q: Queue, now_ms: int) -> None:
    """Series an earlier worker left: completed last closed 3 minutes ago,
    failed 100 minutes ago with three points."""
    r.hset(
        q.keys.metrics("completed"),
        mapping={"count": 4, "prevTS": now_ms - 3 * MINUTE_MS, "prevCount": 1},
    )
    r.rpush(q.keys.metrics_data("completed"), 1)
    r.hset(
        q.keys.metrics("failed"),
        mapping={"count": 10, "prevTS": now_ms - 100 * MINUTE_MS, "prevCount": 8},
    )
    r.rpush(q.keys.metrics_data("failed"), 7, 1, 0)


def add_jobs(q: Queue) -> None:
    """OK_JOBS jobs that complete and FAILING_JOBS that fail for good."""
    q.add_bulk({"name": "ok", "data": {"n": i}} for i in range(OK_JOBS))
    q.add_bulk({"name": "bad", "data": {"fail": "no"}} for _ in range(FAILING_JOBS))


def wait_finished(q: Queue, completed: int, failed: int) -> None:
    """Wait until the queue holds this many completed and failed jobs."""
    wanted = {"completed": completed, "failed": failed}
    wait_until(
        lambda: q.get_counts("completed", "failed") == wanted, 30, what=f"{wanted}"
    )


def check_series(redis_url: str, q: Queue, since_ms: int) -> None:
    """Both clients read EXPECTED, and the same slices of it."""
    until_ms = int(time.time() * 1000)
    for target, want in EXPECTED.items():
        ours = q.get_metrics(target).to_dict()
        theirs = call(redis_url, q.name, "getMetrics", target)
        assert ours == theirs, target
        assert since_ms <= ours["meta"]["prevTS"] <= until_ms
        assert ours["meta"]["count"] == want["count"], target
        assert ours["meta"]["prevCount"] == want["prevCount"], target
        assert ours["data"] == want["data"], target
        assert ours["count"] == len(want["data"])
        part = q.get_metrics(target, 1, 2).to_dict()
        assert part == call(redis_url, q.name, "getMetrics", target, 1, 2)
        assert part["data"] == want["data"][1:3] and part["count"] == ours["count"]


def test_node_worker_metrics_read_by_python(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A Node worker with metrics {maxDataPoints: 5} closes the old minutes
    (with zeros for skipped ones, trimmed to 5) and counts completed and
    failed jobs; Bullpen's get_metrics reads what Node's getMetrics does."""
    q = Queue(qname, redis_url)
    since = minute_with_room()
    seed(r, q, since)
    add_jobs(q)
    worker = node_worker(redis_url, qname, metrics={"maxDataPoints": MAX_POINTS})
    try:
        wait_finished(q, OK_JOBS, FAILING_JOBS)
    finally:
        worker.stop()
    check_series(redis_url, q, since)
    q.close()


def test_python_worker_metrics_read_by_node(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A Bullpen worker with MetricsOptions(5) writes the same series a Node
    worker does, and Node's getMetrics reads it."""
    q = Queue(qname, redis_url)
    since = minute_with_room()
    seed(r, q, since)
    add_jobs(q)
    with python_worker(
        redis_url, qname, metrics=MetricsOptions(MAX_POINTS), concurrency=3
    ):
        wait_finished(q, OK_JOBS, FAILING_JOBS)
    check_series(redis_url, q, since)
    q.close()


def test_node_and_python_workers_add_to_one_series(redis_url: str, qname: str) -> None:
    """Node and Bullpen workers with metrics on one queue count into one
    series: every finished job once, whoever ran it."""
    jobs = 300
    q = Queue(qname, redis_url)
    workers = [
        node_worker(
            redis_url, qname, name="node", concurrency=4, metrics={"maxDataPoints": 60}
        ),
        py_worker(
            redis_url,
            qname,
            worker_name="py",
            concurrency=4,
            metrics={"maxDataPoints": 60},
        ),
    ]
    try:
        q.add_bulk({"name": "n", "data": {"n": i, "sleepMs": 2}} for i in range(jobs))
        wait_finished(q, jobs, 0)
    finally:
        for w in workers:
            w.stop()
    by = Counter(ln["by"] for w in workers for ln in w.seen("done"))
    assert by["node"] > 0 and by["py"] > 0 and sum(by.values()) == jobs
    ours = q.get_metrics("completed")
    assert ours.to_dict() == call(redis_url, qname, "getMetrics", "completed")
    assert ours.meta.count == jobs
    assert sum(ours.data) == ours.meta.prev_count <= jobs
    q.close()


def _identity(workers: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    return {(w["id"], w["addr"], w["name"], w["rawname"]) for w in workers}


def test_get_workers_agrees_with_node(redis_url: str, qname: str) -> None:
    """Named and unnamed workers of both languages are listed alike by Node's
    getWorkers() and Bullpen's get_workers() (same connections, `name` = the
    queue, `rawname` = the connection name); a QueueEvents reader and a
    worker of another queue are not."""
    other = qname + "x"
    procs = [
        node_worker(redis_url, qname, name="n1"),
        node_worker(redis_url, qname),
        py_worker(redis_url, qname, worker_name="p1"),
        py_worker(redis_url, qname, worker_name=""),
        py_worker(redis_url, other, worker_name="elsewhere"),
        node_events(redis_url, qname),
    ]
    q = Queue(qname, redis_url)
    try:
        ours = wait_until(
            lambda: len(found := q.get_workers()) == 4 and found,
            15,
            what="get_workers() to list four workers",
        )
        theirs = call(redis_url, qname, "getWorkers")
        assert _identity(ours) == _identity(theirs)
        base = theirs[0]["rawname"].split(":w:")[0]
        assert sorted(w["rawname"] for w in ours) == sorted(
            [base, base, f"{base}:w:n1", f"{base}:w:p1"]
        )
        assert q.get_workers_count() == call(redis_url, qname, "getWorkersCount") == 4
        assert len(Queue(other, redis_url).get_workers()) == 1
    finally:
        for p in procs:
            p.stop()
        q.close()
