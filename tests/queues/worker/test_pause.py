"""Pause and resume with jobs in flight: running jobs complete, no new job
starts while paused (not even one added meanwhile), and resume restarts
processing."""

from __future__ import annotations

import threading
import time
from typing import Any

from queues import Job, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread


def test_pause_with_jobs_in_flight_then_resume(redis_url: str, q: Queue) -> None:
    """Jobs running when the queue is paused complete; none starts while it is
    paused; all do after resume."""
    started: list[str] = []
    lock = threading.Lock()
    gate = threading.Event()

    def processor(job: Job) -> Any:
        with lock:
            started.append(job.id)
        if job.name == "held":
            assert gate.wait(10)
        return job.id

    q.add_bulk(
        [{"name": "held"} for _ in range(2)] + [{"name": "free"} for _ in range(4)]
    )
    with worker_thread(q.name, processor, redis_url, concurrency=2):
        wait_until(lambda: len(started) == 2, 10, what="two running jobs")
        q.pause()
        assert q.is_paused()
        gate.set()
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 2,
            10,
            what="the running jobs to complete while paused",
        )
        late = q.add("free", None)
        time.sleep(0.8)  # paused: nothing may start
        assert len(started) == 2
        assert q.get_counts("active", "waiting", "completed") == {
            "active": 0,
            "waiting": 5,
            "completed": 2,
        }
        q.resume()
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 7,
            10,
            what="processing after resume",
        )
    assert sorted(started, key=int) == [str(i) for i in range(1, 7)] + [late.id]


def test_worker_started_on_a_paused_queue_waits_for_resume(
    redis_url: str, q: Queue
) -> None:
    """A worker started on a paused queue takes nothing until resume."""
    ran: list[str] = []
    q.pause()
    q.add_bulk([{"name": "p"} for _ in range(3)])
    with worker_thread(q.name, lambda job: ran.append(job.id), redis_url):
        time.sleep(0.5)
        assert ran == []
        q.resume()
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 3,
            10,
            what="processing after resume",
        )
    assert ran == ["1", "2", "3"]
