"""Rate limiting: a worker `limiter` shared by two worker processes, and the
queue's global rate limit, checked on when Redis let each job be claimed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from queues import Job, Queue, defaults
from tests.helpers import CLAIM_CLOCK_SLACK_MS, wait_until
from tests.queues.worker.helpers import (
    WorkerProcess,
    gaps,
    started,
    terminate_all,
    wait_ready,
    worker_thread,
)

#: A claim's time is its `active` event's stream id: Redis's clock, as the
#: window's expiry is; a window may open up to this much before the previous
#: one's first claim + duration, as the tests read them.
CLOCK_SLACK_MS = CLAIM_CLOCK_SLACK_MS


def _starts(q: Queue, ids: list[str]) -> list[int]:
    """When each job was claimed, by Redis's clock: its `active` event's id
    (processedOn is the worker's clock read before the claim is sent, which a
    loaded machine can hold back for hundreds of ms)."""
    wanted = set(ids)
    found = [
        int(entry_id.split("-")[0])
        for entry_id, fields in q.client.xrange(q.keys.events)
        if fields.get("event") == "active" and fields.get("jobId") in wanted
    ]
    assert len(found) == len(ids), (len(found), len(ids))
    return sorted(found)


def _windows(starts: list[int], duration: int) -> list[list[int]]:
    """Split sorted starts into the limiter's windows.

    BullMQ's limiter is a fixed window (docs/protocol.md §6): the first claim after
    the previous window expired opens a new one for `duration` ms. So a
    window opens at the first start at least `duration` after the current
    window's first start, and holds every start before that."""
    windows: list[list[int]] = []
    for start in starts:
        if not windows or start >= windows[-1][0] + duration - CLOCK_SLACK_MS:
            windows.append([start])
        else:
            windows[-1].append(start)
    return windows


def _check_windows(starts: list[int], max_jobs: int, duration: int) -> None:
    """No limiter window of `duration` ms holds more than `max_jobs` starts,
    so there are as few windows as the limit allows and no fewer."""
    windows = _windows(starts, duration)
    sizes = [len(w) for w in windows]
    assert max(sizes) <= max_jobs, (
        sizes,
        [[s - starts[0] for s in w] for w in windows],
    )
    assert len(windows) == -(-len(starts) // max_jobs), sizes


def test_limiter_across_two_worker_processes(
    redis_url: str, q: Queue, r: redis.Redis, spawn: Callable[..., WorkerProcess]
) -> None:
    """limiter max=5 per 500 ms, 30 jobs, two processes of concurrency 3 (so
    both must take part in every window): never more than 5 starts in a
    500 ms window, and the 30 take about 5 windows' time after the first."""
    limiter = {"max": 5, "duration": 500}
    workers = [spawn(concurrency=3, limiter=limiter) for _ in range(2)]
    wait_ready(r, q.name, workers)
    ids = [
        j.id
        for j in q.add_bulk(
            [{"name": "rl", "data": {"sleep_ms": 100}} for _ in range(30)]
        )
    ]
    wait_until(
        lambda: q.get_counts("completed")["completed"] == 30,
        15,
        0.05,
        what="30 rate-limited jobs",
    )
    assert terminate_all(workers) == [0, 0]
    starts = _starts(q, ids)
    _check_windows(starts, 5, 500)
    total = starts[-1] - starts[0]
    assert 2500 - CLOCK_SLACK_MS <= total <= 2500 + 400, (total, starts)
    by_pid = {e["pid"] for e in started(r, q.name)}
    assert by_pid == {w.pid for w in workers}


def test_global_rate_limit(redis_url: str, q: Queue) -> None:
    """queue.set_global_rate_limit(4, 400) limits workers that have no limiter."""
    q.set_global_rate_limit(4, 400)
    ids = [j.id for j in q.add_bulk([{"name": "g"} for _ in range(12)])]

    def processor(job: Job) -> Any:
        return None

    with (
        worker_thread(q.name, processor, redis_url, concurrency=5),
        worker_thread(q.name, processor, redis_url, concurrency=5),
    ):
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 12,
            10,
            what="12 rate-limited jobs",
        )
    starts = _starts(q, ids)
    _check_windows(starts, 4, 400)
    total = starts[-1] - starts[0]
    assert 800 - CLOCK_SLACK_MS <= total <= 800 + 300, (total, starts)


def test_idle_limited_workers_resume_when_the_window_ends(
    redis_url: str, q: Queue
) -> None:
    """Workers that were refused by the limiter claim again when the window
    ends (no marker announces it): 1 job per 300 ms, 5 jobs, two workers,
    about 1.2 s in all, not a drain_delay (5 s) wait per window. A gap may run
    late by what a busy machine takes to wake a thread (514 ms was seen with
    two busy loops beside the suite), so the bound is the window plus 1 s,
    about a quarter of the drain delay each would wait."""
    ids = [j.id for j in q.add_bulk([{"name": "l"} for _ in range(5)])]
    limiter = {"max": 1, "duration": 300}
    with (
        worker_thread(q.name, lambda job: None, redis_url, limiter=limiter),
        worker_thread(q.name, lambda job: None, redis_url, limiter=limiter),
    ):
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 5, 8, what="5 jobs"
        )
    starts = _starts(q, ids)
    _check_windows(starts, 1, 300)
    assert gaps(starts) and all(
        300 - CLOCK_SLACK_MS <= g <= 300 + 1000 for g in gaps(starts)
    ), gaps(starts)
    # ... which stays far below the drain delay the test tells apart.
    assert 300 + 1000 < defaults.DRAIN_DELAY_S * 1000 / 3


def test_removing_global_rate_limit(redis_url: str, q: Queue) -> None:
    """After remove_global_rate_limit() jobs run unthrottled."""
    q.set_global_rate_limit(1, 60_000)
    q.remove_global_rate_limit()
    ids = [j.id for j in q.add_bulk([{"name": "g"} for _ in range(20)])]
    with worker_thread(q.name, lambda job: None, redis_url, concurrency=5):
        wait_until(
            lambda: q.get_counts("completed")["completed"] == 20, 10, what="20 jobs"
        )
    starts = _starts(q, ids)
    assert starts[-1] - starts[0] < 1000
