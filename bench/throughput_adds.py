"""Producer measures of bench/throughput.py: jobs added one call at a time.

  single add sync    `Queue.add` N times, each after the last returned
                     (BullMQ: `await queue.add` in a loop).
  single add async   `await AsyncQueue.add` N times in one coroutine.
  concurrent adds    C coroutines each awaiting `AsyncQueue.add` in a loop, as
                     the handlers of a busy API do: Bullpen's auto-pipelining
                     against BullMQ with ioredis `enableAutoPipelining: true`.

Each side adds a few jobs first (the script loaded, the connection warm) and
times only its N adds; adds/s = N / seconds.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from throughput_libs import BenchError, Budget, BullMQ, Library  # noqa: E402

from queues import AsyncQueue, Queue  # noqa: E402

#: Adds before the timed ones (as bench/node/bench.mjs does).
WARM_ADDS = 50
#: The coroutines of the concurrent-adds measure.
ADD_CONCURRENCY = 50


def _checked(name: str, added: int, n: int) -> None:
    if added != n:
        raise BenchError(f"{name} added {added} of {n} jobs")


def bullpen_single_sync(url: str, queue: str, n: int) -> float:
    """Seconds for n sequential `Queue.add` calls."""
    with Queue(queue, connection=url) as q:
        for _ in range(WARM_ADDS):
            q.add("warm", {})
        t0 = time.perf_counter()
        for _ in range(n):
            q.add("noop", {})
        return time.perf_counter() - t0


async def _single_async(url: str, queue: str, n: int) -> float:
    async with AsyncQueue(queue, connection=url) as q:
        for _ in range(WARM_ADDS):
            await q.add("warm", {})
        t0 = time.perf_counter()
        for _ in range(n):
            await q.add("noop", {})
        return time.perf_counter() - t0


async def _concurrent(url: str, queue: str, n: int, c: int) -> float:
    async with AsyncQueue(queue, connection=url) as q:
        for _ in range(WARM_ADDS):
            await q.add("warm", {})
        added = 0

        async def loop(share: int) -> None:
            nonlocal added
            for _ in range(share):
                await q.add("noop", {})
                added += 1

        shares = [n // c + (1 if k < n % c else 0) for k in range(c)]
        t0 = time.perf_counter()
        await asyncio.gather(*(loop(s) for s in shares))
        seconds = time.perf_counter() - t0
    _checked("Bullpen concurrent adds", added, n)
    return seconds


def bullpen_single_async(url: str, queue: str, n: int) -> float:
    """Seconds for n sequential `await AsyncQueue.add` calls."""
    return asyncio.run(_single_async(url, queue, n))


def bullpen_concurrent(url: str, queue: str, n: int, c: int) -> float:
    """Seconds for n adds made by c coroutines on one AsyncQueue."""
    return asyncio.run(_concurrent(url, queue, n, c))


def bullmq_adds(
    lib: BullMQ, mode: str, queue: str, n: int, c: int, budget: Budget
) -> float:
    """Seconds for BullMQ's n adds: mode "single" or "concurrent" (with
    enableAutoPipelining)."""
    argv = [f"{mode}-add", "--queue", queue, "--jobs", str(n)]
    if mode == "concurrent":
        argv += ["--concurrency", str(c), "--auto-pipelining", "1"]
    reply = lib.run_json(argv, budget.cap(120))
    _checked(f"BullMQ {mode} adds", int(reply["added"]), n)
    return float(reply["seconds"])


#: measure key -> (row label, Bullpen's mode)
MODES = {
    "single_sync": "single add, sync (adds/s)",
    "single_async": "single add, async (adds/s)",
    "concurrent": f"concurrent adds, {ADD_CONCURRENCY} coroutines, "
    "auto-pipelined (adds/s)",
}


def measure_adds(lib: Library, key: str, queue: str, n: int, budget: Budget) -> float:
    """adds/s of one library in one producer mode (see MODES)."""
    if isinstance(lib, BullMQ):
        mode = "single" if key.startswith("single") else "concurrent"
        seconds = bullmq_adds(lib, mode, queue, n, ADD_CONCURRENCY, budget)
    elif key == "single_sync":
        seconds = bullpen_single_sync(lib.url, queue, n)
    elif key == "single_async":
        seconds = bullpen_single_async(lib.url, queue, n)
    else:
        seconds = bullpen_concurrent(lib.url, queue, n, ADD_CONCURRENCY)
    return n / seconds


def measure_producers(
    libs: list[Library],
    r: Any,
    n: int,
    budget: Budget,
    tag: str,
    notes: list[str],
) -> dict[str, dict[str, float]]:
    """adds/s of every library in every producer mode, interleaved (each mode
    for one library, then at once for the other), the database flushed
    between measures: library name -> mode -> adds/s."""
    out: dict[str, dict[str, float]] = {lib.name: {} for lib in libs}
    for key in MODES:
        for lib in libs:
            if budget.left() < 15:
                notes.append(f"{lib.name} {key}: skipped, out of time")
                continue
            print(f"  {lib.name}: {MODES[key]}, {n} jobs ...", file=sys.stderr)
            try:
                queue = f"bench-{lib.name.lower()}-{key}-{tag}"
                out[lib.name][key] = measure_adds(lib, key, queue, n, budget)
            except BenchError as exc:
                notes.append(f"{lib.name} {key}: {exc}")
            finally:
                r.flushdb()
    return out
