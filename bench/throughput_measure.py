"""The measurements of bench/throughput.py: one worker run, processing
throughput and pickup latency, for either library (see throughput_libs)."""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

import redis  # noqa: E402
from throughput_libs import (  # noqa: E402
    BenchError,
    Budget,
    Library,
    failed_count,
    job_fields,
    percentile,
    process_cpu_us,
    wait_finished,
)


def run_worker(
    lib: Library,
    r: redis.Redis,
    queue: str,
    n: int,
    concurrency: int,
    processor: str,
    budget: Budget,
    sync: bool = False,
    cprofile: str | None = None,
    while_running: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Start a worker process on the queue, let it finish n jobs, stop it.

    Returns its CPU time between GO and STOP (as it reports it), the
    redis-server's CPU time over the same window (from /proc, 10 ms ticks)
    and how many jobs finished."""
    worker = lib.worker(queue, concurrency, processor, sync=sync, cprofile=cprofile)
    redis_pid = int(r.info("server")["process_id"])
    try:
        worker.read_json(budget.cap(30))  # READY
        redis_cpu0 = process_cpu_us(redis_pid)
        worker.send("GO")
        if while_running is not None:
            while_running()
        done = wait_finished(r, queue, n, budget.cap(90))
        redis_cpu1 = process_cpu_us(redis_pid)
        worker.send("STOP")
        reply = worker.read_json(budget.cap(20))
        worker.finish(20)
    finally:
        worker.kill()
    redis_cpu = (
        redis_cpu1 - redis_cpu0
        if redis_cpu0 is not None and redis_cpu1 is not None
        else None
    )
    return {
        "cpu_us": int(reply["cpu_us"]),
        "user_us": reply.get("user_us"),
        "sys_us": reply.get("sys_us"),
        "redis_cpu_us": redis_cpu,
        "finished": done,
        "failed": failed_count(r, queue),
    }


def measure_processing(
    lib: Library,
    r: redis.Redis,
    queue: str,
    n: int,
    concurrency: int,
    budget: Budget,
    sync: bool = False,
    cprofile: str | None = None,
) -> dict[str, Any]:
    add_s = lib.bulk_add(queue, n, budget)
    run = run_worker(
        lib, r, queue, n, concurrency, "noop", budget, sync=sync, cprofile=cprofile
    )
    rows = job_fields(r, queue, ("processedOn", "finishedOn"))
    processed_on = [int(p) for p, f in rows if p and f]
    finished_on = [int(f) for p, f in rows if p and f]
    if not processed_on:
        raise BenchError(f"{lib.name} c={concurrency}: no job completed")
    span_ms = max(max(finished_on) - min(processed_on), 1)
    completed = len(processed_on)
    return {
        "concurrency": concurrency,
        "processor": "def" if sync else "async",
        "jobs": n,
        "completed": completed,
        "failed": run["failed"],
        "timed_out": run["finished"] < n,
        "bulk_add_s": add_s,
        "bulk_add_jobs_per_s": n / add_s,
        "span_ms": span_ms,
        "jobs_per_s": completed / (span_ms / 1000),
        "worker_cpu_us": run["cpu_us"],
        "worker_user_us": run["user_us"],
        "worker_sys_us": run["sys_us"],
        "cpu_us_per_job": run["cpu_us"] / max(completed, 1),
        "redis_cpu_us": run["redis_cpu_us"],
        "redis_cpu_us_per_job": (
            run["redis_cpu_us"] / max(completed, 1)
            if run["redis_cpu_us"] is not None
            else None
        ),
    }


def measure_pickup(
    lib: Library, r: redis.Redis, queue: str, n: int, interval_ms: float, budget: Budget
) -> dict[str, Any]:
    def add_jobs() -> None:
        time.sleep(0.5)  # let the worker connect and block, idle, on the marker
        lib.pickup_add(queue, n, interval_ms, budget)

    run = run_worker(lib, r, queue, n, 1, "stamp", budget, while_running=add_jobs)
    rows = job_fields(r, queue, ("data", "returnvalue", "timestamp", "processedOn"))
    precise: list[float] = []
    coarse: list[float] = []
    for data, returnvalue, timestamp, processed_on in rows:
        try:
            precise.append(
                float(json.loads(returnvalue)) - float(json.loads(data)["t"])
            )
            coarse.append(float(int(processed_on) - int(timestamp)))
        except (TypeError, ValueError, KeyError):
            continue
    if not precise:
        raise BenchError(f"{lib.name} pickup: no job completed")
    return {
        "jobs": n,
        "interval_ms": interval_ms,
        "completed": len(precise),
        "failed": run["failed"],
        "timed_out": run["finished"] < n,
        "p50_ms": percentile(precise, 50),
        "p99_ms": percentile(precise, 99),
        "max_ms": max(precise),
        "mean_ms": statistics.fmean(precise),
        "redis_p50_ms": percentile(coarse, 50),
        "redis_p99_ms": percentile(coarse, 99),
        "worker_cpu_us": run["cpu_us"],
    }
