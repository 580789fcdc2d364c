"""Order of processing: priority (lower number first; priority-0 jobs in
`wait` drain before prioritized ones), FIFO within a priority, and LIFO."""

from __future__ import annotations

import threading
from typing import Any

from queues import Job, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread


def _run_in_order(redis_url: str, q: Queue, n: int) -> list[str]:
    """Process the queue with one worker at concurrency 1; the job names in order."""
    order: list[str] = []

    def processor(job: Job) -> Any:
        order.append(job.name)

    with worker_thread(q.name, processor, redis_url, concurrency=1):
        wait_until(lambda: len(order) >= n, 10, what=f"{n} jobs to run")
        wait_until(
            lambda: q.get_counts("completed")["completed"] == n, 10, what="completion"
        )
    return order


def test_priority_order_with_fifo_within_priority(redis_url: str, q: Queue) -> None:
    """wait (priority 0, FIFO) first, then priorities ascending, FIFO within each."""
    plan = [
        ("a0", 0),
        ("b3", 3),
        ("c1", 1),
        ("d0", 0),
        ("e1", 1),
        ("f2", 2),
        ("g3", 3),
        ("h1", 1),
        ("i0", 0),
        ("j2", 2),
    ]
    for name, priority in plan:
        q.add(name, None, priority=priority)
    assert _run_in_order(redis_url, q, len(plan)) == [
        "a0",
        "d0",
        "i0",
        "c1",
        "e1",
        "h1",
        "f2",
        "j2",
        "b3",
        "g3",
    ]


def test_fifo_many_jobs_same_priority(redis_url: str, q: Queue) -> None:
    """Thirty jobs of one priority, and thirty without, run in insertion order."""
    q.add_bulk([{"name": f"p{i:02}", "opts": {"priority": 7}} for i in range(30)])
    q.add_bulk([{"name": f"w{i:02}"} for i in range(30)])
    assert _run_in_order(redis_url, q, 60) == (
        [f"w{i:02}" for i in range(30)] + [f"p{i:02}" for i in range(30)]
    )


def test_wait_drains_before_prioritized_while_running(redis_url: str, q: Queue) -> None:
    """A priority-0 job added while prioritized jobs wait runs before all of them."""
    order: list[str] = []
    first_running = threading.Event()
    release = threading.Event()

    def processor(job: Job) -> Any:
        order.append(job.name)
        if job.name == "p1-first":
            first_running.set()
            assert release.wait(10)

    q.add("p1-first", None, priority=1)
    q.add("p1-second", None, priority=1)
    q.add("p2", None, priority=2)
    with worker_thread(q.name, processor, redis_url, concurrency=1):
        assert first_running.wait(10)
        q.add("late-p0", None)
        q.add("late-p1", None, priority=1)
        release.set()
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 5, 10, what="5 jobs"
        )
    assert order == ["p1-first", "late-p0", "p1-second", "late-p1", "p2"]


def test_lifo_jobs_run_before_older_ones_newest_first(redis_url: str, q: Queue) -> None:
    """lifo jobs go to the tail of wait: the newest lifo job runs first, then
    the older lifo ones, then the FIFO ones in order."""
    for name in ("f1", "f2", "f3"):
        q.add(name, None)
    for name in ("l1", "l2", "l3"):
        q.add(name, None, lifo=True)
    q.add("f4", None)
    assert _run_in_order(redis_url, q, 7) == ["l3", "l2", "l1", "f1", "f2", "f3", "f4"]


def test_lifo_job_added_while_running_runs_next(redis_url: str, q: Queue) -> None:
    """A lifo job added while others wait jumps the queue."""
    order: list[str] = []
    first_running = threading.Event()
    release = threading.Event()

    def processor(job: Job) -> Any:
        order.append(job.name)
        if job.name == "f1":
            first_running.set()
            assert release.wait(10)

    for name in ("f1", "f2", "f3"):
        q.add(name, None)
    with worker_thread(q.name, processor, redis_url, concurrency=1):
        assert first_running.wait(10)
        q.add("urgent", None, lifo=True)
        release.set()
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 4, 10, what="4 jobs"
        )
    assert order == ["f1", "urgent", "f2", "f3"]
