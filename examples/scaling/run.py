"""Scaling, end to end: `python -m examples.scaling.run`.

A backlog builds on a queue worked by one GPU worker process; the workers
are scaled up to four through `Fleet.set_desired` (the call the dashboard's
scale control makes); the backlog drains about four times faster; scaled
back down, the removed workers finish the jobs they hold before exiting.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from examples.stack import Stack, wait_for
from gpu_workers import Fleet
from queues import Queue

QUEUE = "render-batch"
HOST = "example-host"
#: One job: three 0.1 s steps holding 2 GiB of (simulated) VRAM.
JOB = {"name": "demo", "data": {"steps": 3, "step_s": 0.1, "vram": "2GiB"}}


def live(fleet: Fleet) -> list[dict[str, Any]]:
    """This queue's worker processes that are up."""
    return [
        w
        for w in fleet.list_workers(HOST)
        if w.get("queue") == QUEUE and w.get("state") in ("idle", "busy", "draining")
    ]


def window(seconds: float) -> tuple[float, float]:
    """The next `seconds`, as (start, end) in epoch ms (the clock of the
    jobs' processedOn and finishedOn: workers on this host)."""
    start = time.time() * 1000
    time.sleep(seconds)
    return start, time.time() * 1000


def rate_in(finished: list[int], span: tuple[float, float]) -> float:
    """Jobs per second between the first and the last completion inside
    `span` (from the jobs' own finishedOn, so a counter read late on a busy
    machine does not move it)."""
    times = sorted(t for t in finished if span[0] <= t <= span[1])
    if len(times) < 2 or times[-1] == times[0]:
        return 0.0
    return (len(times) - 1) * 1000 / (times[-1] - times[0])


def peak_running(intervals: list[tuple[int, int]]) -> int:
    """The most jobs running at one moment, from (processedOn, finishedOn)."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    running = peak = 0
    for _, step in edges:  # an end sorts before a start at the same ms
        running += step
        peak = max(peak, running)
    return peak


def scenario(
    redis_url: str,
    workdir: Path,
    jobs: int = 100,
    window_s: float = 2.0,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Backlog, scale up, scale down; returns the measurements."""
    stack = Stack(redis_url, workdir)
    fleet = Fleet(redis_url)
    q = Queue(QUEUE, redis_url)
    try:
        stack.start_supervisor(
            [{"queue": QUEUE, "slots": 1, "workers": 1}],
            gpus="sim:4x24GiB",
            handler_modules=["gpu_workers.demo_handlers"],
            host=HOST,
        )
        wait_for(lambda: len(live(fleet)) == 1, timeout, "one worker")
        q.add_bulk([JOB] * jobs)
        wait_for(lambda: q.get_counts()["completed"] >= 2, timeout, "the first jobs")
        one = window(window_s)
        scaled_up_ms = time.time() * 1000
        fleet.set_desired(HOST, QUEUE, workers=4)
        wait_for(
            lambda: len([w for w in live(fleet) if w["state"] == "busy"]) == 4,
            timeout,
            "four busy workers",
        )
        four = window(window_s)
        wait_for(
            lambda: q.get_counts()["waiting"] <= 4, timeout, "the backlog to shrink"
        )
        running = [j.id for j in q.get_jobs("active")]
        fleet.set_desired(HOST, QUEUE, workers=1)
        states_seen: set[str] = set()

        def scaled_down() -> bool:
            workers = live(fleet)
            states_seen.update(w["state"] for w in workers)
            return len(workers) == 1

        wait_for(scaled_down, timeout, "the scale-down", interval=0.02)
        wait_for(lambda: q.get_counts()["completed"] == jobs, timeout, "every job")
        stream = q.client.xrange(q.keys.events, count=100_000)
        done = [
            (j.processed_on or 0, j.finished_on or 0)
            for j in q.get_jobs("completed", 0, jobs)
        ]
        rate_1 = rate_in([b for _, b in done], one)
        rate_4 = rate_in([b for _, b in done], four)
        return {
            "rate_1": rate_1,
            "rate_4": rate_4,
            "speedup": rate_4 / rate_1 if rate_1 else 0.0,
            "peak_running_before_scale_up": peak_running(
                [(a, b) for a, b in done if a < scaled_up_ms]
            ),
            "peak_running": peak_running(done),
            "counts": q.get_counts(),
            "running_at_scale_down": running,
            "finished": {
                jid: (q.get_job_state(jid).value, q.get_job(jid).stalled_counter)
                for jid in running
            },
            "stalled_events": sum(1 for _, f in stream if f.get("event") == "stalled"),
            "states_seen": sorted(states_seen),
            "workers_after": len(live(fleet)),
        }
    finally:
        stack.close()
        fleet.close()
        q.close()


def main() -> None:
    """Run on a throwaway Redis and print the measurements."""
    from queues.devredis import RedisServer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis-url", help="an existing Redis (default: start one)")
    args = parser.parse_args()
    server = None if args.redis_url else RedisServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = scenario(args.redis_url or server.url, Path(tmp))  # type: ignore[union-attr]
    finally:
        if server is not None:
            server.stop()
    print(
        f"1 worker: {result['rate_1']:.1f} jobs/s; 4 workers: {result['rate_4']:.1f} "
        f"jobs/s ({result['speedup']:.2f}x, expected 4x)"
    )
    print(
        f"scale-down: {len(result['running_at_scale_down'])} running jobs finished "
        f"({result['finished']}); stalled events: {result['stalled_events']}; "
        f"worker states seen: {result['states_seen']}"
    )


if __name__ == "__main__":
    main()
