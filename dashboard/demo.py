"""The demo that `make run` starts: a producer adding jobs to the `demo` queue
and a worker that steps through them with progress and logs."""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import time

from queues import Job, Queue, UnrecoverableError, Worker


async def process(job: Job) -> dict[str, int]:
    """Step through a simulated render, reporting progress; a few fail."""
    steps = int(job.data.get("steps", 10))
    for step in range(1, steps + 1):
        await asyncio.sleep(0.2)
        await job.update_progress(round(100 * step / steps))
    if job.data.get("fail"):
        raise UnrecoverableError("demo job asked to fail")
    await job.log(f"rendered {steps} steps")
    return {"steps": steps}


def produce(queue: Queue, stop: threading.Event) -> None:
    """Add a demo job every couple of seconds until stopped."""
    n = 0
    while not stop.wait(2.0):
        n += 1
        queue.add("render", {"steps": random.randint(5, 20), "fail": n % 7 == 0},
                  priority=random.choice([0, 0, 1, 5]), attempts=2,
                  backoff={"type": "exponential", "delay": 1000},
                  remove_on_complete={"count": 500})


def main(redis_url: str) -> None:
    """Run the producer in a thread and the worker in the foreground."""
    queue = Queue("demo", redis_url)
    stop = threading.Event()
    threading.Thread(target=produce, args=(queue, stop), daemon=True).start()
    try:
        Worker("demo", process, connection=redis_url, concurrency=4,
               worker_name=f"demo-{time.strftime('%H%M%S')}").run()
    finally:
        stop.set()


if __name__ == "__main__":
    main(sys.argv[1])
