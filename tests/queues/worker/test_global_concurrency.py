"""Global concurrency: queue.set_global_concurrency(2) with two worker
processes of concurrency 5 never has more than 2 jobs active at once."""

from __future__ import annotations

import threading
from collections.abc import Callable

import redis

from queues import Queue
from queues.connection import sync_client
from tests.helpers import wait_until
from tests.queues.worker.helpers import (
    WorkerProcess,
    started,
    terminate_all,
    wait_ready,
)


def test_global_concurrency_across_processes(
    redis_url: str, q: Queue, r: redis.Redis, spawn: Callable[..., WorkerProcess]
) -> None:
    """Sampled LLEN active and the processors' own INCR/DECR counter both
    stay at or below 2, and reach 2."""
    q.set_global_concurrency(2)
    workers = [spawn(concurrency=5) for _ in range(2)]
    wait_ready(r, q.name, workers)
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        client = sync_client(redis_url)  # a plain or cluster URL
        while not stop.is_set():
            samples.append(client.llen(q.keys.active))
            stop.wait(0.005)
        client.close()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    q.add_bulk([{"name": "c", "data": {"sleep_ms": 60}} for _ in range(24)])
    try:
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 24,
            15,
            0.05,
            what="24 jobs",
        )
    finally:
        stop.set()
        sampler.join(5)
    assert terminate_all(workers) == [0, 0]
    running = [e["running"] for e in started(r, q.name)]
    assert len(running) == 24
    assert max(running) == 2, running
    assert max(samples) == 2, samples
    # at least 24 jobs x 60 ms / 2 at a time
    starts = sorted(q.get_job(str(i)).processed_on for i in range(1, 25))
    assert starts[-1] - starts[0] >= 11 * 60
    assert q.get_counts("active", "waiting", "failed") == {
        "active": 0,
        "waiting": 0,
        "failed": 0,
    }


def test_idle_workers_pick_up_when_a_slot_frees(
    redis_url: str, q: Queue, r: redis.Redis, spawn: Callable[..., WorkerProcess]
) -> None:
    """With global concurrency 1, jobs keep flowing to both workers without
    waiting out a drain_delay: each slot release wakes an idle worker."""
    q.set_global_concurrency(1)
    workers = [spawn(concurrency=5, drain_delay=30) for _ in range(2)]
    wait_ready(r, q.name, workers)
    q.add_bulk([{"name": "c", "data": {"sleep_ms": 50}} for _ in range(10)])
    wait_until(
        lambda: q.get_counts("completed")["completed"] == 10,
        5,
        0.02,
        what="10 jobs, one at a time",
    )
    assert terminate_all(workers) == [0, 0]
    assert max(e["running"] for e in started(r, q.name)) == 1
