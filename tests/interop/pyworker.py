"""A Python worker process for the interop tests, the twin of
`node bull.mjs <port> worker`: JSON lines on stdout ({"ready"}, {"start"},
{"done"}), SIGTERM closes it, SIGKILL kills it. Options are AsyncWorker's,
except `metrics`, given as Node's `{"maxDataPoints": n}`.

    python -m tests.interop.pyworker <redis url> <queue> <options JSON>
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from queues import AsyncWorker, Job, MetricsOptions
from tests.interop.behaviour import behave


def out(value: Any) -> None:
    """One JSON line, flushed at once (the test reads it live)."""
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def main(url: str, queue: str, options: dict[str, Any]) -> None:
    name = options.pop("worker_name", "py")
    if "metrics" in options:
        options["metrics"] = MetricsOptions(options["metrics"]["maxDataPoints"])

    async def processor(job: Job) -> Any:
        out(
            {
                "start": job.id,
                "attemptsMade": job.attempts_made,
                "priority": job.priority,
                "at": int(time.time() * 1000),
            }
        )
        result = await behave(job, name)
        out({"done": job.id, "by": name})
        return result

    worker = AsyncWorker(queue, processor, connection=url, worker_name=name, **options)
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(0.05)
    out({"ready": True})
    await task
    out({"closed": True})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
