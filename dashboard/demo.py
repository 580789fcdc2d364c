"""The demo producer that `make run` starts: a realistic mix of GPU jobs on the
`gpu` queue for the demo handler (gpu_workers/demo_handlers.py), with some
prioritised, some delayed, some failing and retried, the odd job too big
for any GPU, and most of them in one of three customers' groups.

    python -m dashboard.demo [queue]    (Redis: the REDIS_URL setting)

The Redis URL comes from the settings (the environment), never argv: a
command line is readable by anyone on the host (ps)."""

from __future__ import annotations

import logging
import random
import signal
import sys
import threading

from queues import Queue
from queues.outages import Outage, recoverable

BACKLOG_TARGET = 12
#: Seconds between two looks at the backlog.
PACE_S = 1.0

log = logging.getLogger(__name__)


def next_job(n: int) -> tuple[str, dict[str, object], dict[str, object]]:
    """The n-th demo job: (name, data, options)."""
    roll = random.random()
    data: dict[str, object] = {
        "vram": random.choice(["2GiB", "4GiB", "6GiB", "10GiB", "16GiB"]),
        "steps": random.randint(8, 30),
        "step_s": round(random.uniform(0.15, 0.5), 2),
        "prompt": random.choice(["a cat in a hat", "city at night", "<b>bold</b>"]),
    }
    opts: dict[str, object] = {"attempts": 3, "remove_on_complete": {"count": 1000}}
    if roll < 0.08:
        data["fail"] = True
        opts["backoff"] = {"type": "exponential", "delay": 2000}
    elif roll < 0.10:
        data["vram"] = "64GiB"  # larger than a simulated 24 GiB card: fails at once
    elif roll < 0.25:
        opts["priority"] = random.choice([1, 2, 5])
    elif roll < 0.35:
        opts["delay"] = random.randint(3000, 20000)
    # Most jobs belong to a customer (docs/groups.md), acme with the biggest
    # share; the rest are ungrouped and take their own turn.
    if random.random() < 0.8:
        opts["group"] = random.choice(["acme", "acme", "acme", "globex", "initech"])
    return "demo", data, opts


def top_up(queue: Queue, n: int) -> int:
    """Add up to 3 jobs towards the backlog target; the number of the last."""
    counts = queue.get_counts("waiting", "prioritized", "delayed")
    missing = max(BACKLOG_TARGET - sum(counts.values()), 0)
    for _ in range(min(missing, 3)):
        n += 1
        name, data, opts = next_job(n)
        queue.add(name, data, **opts)
    return n


def main(redis_url: str, queue_name: str = "gpu") -> None:
    """Keep a backlog of demo jobs flowing until SIGTERM/SIGINT. Redis
    outages are waited out (logged when one starts and ends), as a worker
    does: make run stops everything when one of its processes exits, and a
    Redis that stalled for a second took the whole demo down with this one."""
    queue = Queue(queue_name, redis_url)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    outage = Outage("demo producer", log)
    n = 0
    pause = PACE_S
    while not stop.wait(pause):
        try:
            n = top_up(queue, n)
        except Exception as exc:
            if not recoverable(exc):
                raise
            pause = max(outage.failed(exc), PACE_S)
            continue
        outage.succeeded()
        pause = PACE_S
    queue.close()


if __name__ == "__main__":
    from django.conf import settings

    main(settings.REDIS_URL, *sys.argv[1:2])
