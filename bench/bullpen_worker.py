"""The worker process of bench/throughput.py: one Bullpen AsyncWorker.

    python bench/bullpen_worker.py --url URL --queue Q --concurrency C
        [--processor noop|stamp] [--sync] [--cprofile FILE]

Line protocol on stdin/stdout (the same as `node bench/node/bench.mjs worker`):
prints {"ready": true} once imported and built, starts the worker on a GO line,
and on a STOP line prints {"cpu_us", "user_us", "sys_us"} -- the CPU time of
this whole process (all threads) between GO and STOP, from getrusage -- then
closes the worker and exits.

`noop` processors return None; `stamp` ones return the wall-clock time (ms)
at which they started, stored by the worker as the job's returnvalue.
`--sync` uses a plain `def` processor (run in the worker's thread pool).
It runs on the event loop Bullpen's own runners use (queues/eventloop.py:
uvloop where installed), as a `Worker.run()` or `bullpen-worker` does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues import AsyncWorker  # noqa: E402
from queues.eventloop import run  # noqa: E402


async def noop_async(job: object) -> None:
    return None


def noop_sync(job: object) -> None:
    return None


async def stamp_async(job: object) -> float:
    return time.time() * 1000


def stamp_sync(job: object) -> float:
    return time.time() * 1000


def cpu_us() -> tuple[int, int]:
    """(user, system) CPU time of this process, all threads, in microseconds."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return int(r.ru_utime * 1_000_000), int(r.ru_stime * 1_000_000)


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main(args: argparse.Namespace) -> None:
    processor: Callable[[Any], Any]
    if args.processor == "stamp":
        processor = stamp_sync if args.sync else stamp_async
    else:
        processor = noop_sync if args.sync else noop_async
    worker = AsyncWorker(
        args.queue, processor, connection=args.url, concurrency=args.concurrency
    )
    loop = asyncio.get_running_loop()

    async def next_line() -> str:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        return line.strip() if line else "STOP"

    emit({"ready": True})
    while await next_line() != "GO":
        pass
    profiler = None
    if args.cprofile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start = cpu_us()
    running = asyncio.create_task(worker.run(install_signals=False))
    while await next_line() != "STOP":
        pass
    end = cpu_us()
    user, system = end[0] - start[0], end[1] - start[1]
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.cprofile)
    emit(
        {
            "cpu_us": user + system,
            "user_us": user,
            "sys_us": system,
            "processed": worker.processed,
        }
    )
    worker.close()
    try:
        await asyncio.wait_for(running, 15)
    except TimeoutError:
        sys.stderr.write("bullpen_worker: worker did not close within 15 s\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--processor", choices=("noop", "stamp"), default="noop")
    parser.add_argument("--sync", action="store_true", help="plain `def` processor")
    parser.add_argument("--cprofile", help="write cProfile stats (GO..STOP) here")
    # On the loop Worker.run() and bullpen-worker use (uvloop where installed).
    run(main(parser.parse_args()))
