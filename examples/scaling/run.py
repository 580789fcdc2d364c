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


def rate(q: Queue, seconds: float) -> float:
    """Jobs completed per second over the next `seconds`."""
    start, t0 = q.get_counts()["completed"], time.monotonic()
    time.sleep(seconds)
    return (q.get_counts()["completed"] - start) / (time.monotonic() - t0)


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
        one = rate(q, window_s)
        fleet.set_desired(HOST, QUEUE, workers=4)
        wait_for(
            lambda: len([w for w in live(fleet) if w["state"] == "busy"]) == 4,
            timeout,
            "four busy workers",
        )
        four = rate(q, window_s)
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
        return {
            "rate_1": one,
            "rate_4": four,
            "speedup": four / one if one else 0.0,
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
