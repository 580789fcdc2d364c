"""Bullpen's throughput benchmark, side by side with Node.js BullMQ 6.

    .venv/bin/python bench/throughput.py [--jobs 10000] [--no-node] ...

One run starts one throwaway redis-server (a free port, never 6379, no
persistence) and measures on it, for Bullpen and -- where `node` and
bench/node/node_modules are there -- for BullMQ 6.7.0 (bench/node/bench.mjs):

  bulk add    N no-op jobs in one call (Queue.add_bulk / Queue.addBulk).
  processing  those N jobs by ONE worker in its own OS process, at
              concurrency 1, 10 and 50 (plus Bullpen with a plain `def`
              processor at 10), --rounds times each, the fastest round
              reported: jobs/s from the first job's processedOn to
              the last job's finishedOn, both read back from Redis; the
              worker process's CPU time (user + system, all threads, between
              the start signal and the stop signal) per job; and the
              redis-server's CPU time per job over the same window.
  pickup      jobs added one at a time, --pickup-interval-ms apart, to an
              idle worker at concurrency 1: p50/p99 of (the processor's start
              time - the adder's time just before its add call), both
              wall-clock with sub-ms precision; also p50/p99 of Redis'
              (processedOn - timestamp), which has 1 ms resolution.

Both libraries are measured by this script in the same way, interleaved
(each processing configuration runs for Bullpen, then for BullMQ), with fresh
queue names on the same server, the database flushed between measurements.
It prints one table and writes the figures as JSON to
bench/results/throughput-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue as queue_mod
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
NODE_DIR = BENCH / "node"
RESULTS = BENCH / "results"
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from queues import Queue  # noqa: E402
from tests.redis_server import RedisServer, find_redis_server  # noqa: E402

PREFIX = "bull"
CONCURRENCIES = (1, 10, 50)
SYNC_CONCURRENCY = 10


class BenchError(RuntimeError):
    """A measurement could not be completed."""


class Budget:
    """The run's overall time limit; every wait is bounded by it."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def cap(self, seconds: float) -> float:
        return max(0.5, min(seconds, self.left()))


# --- worker processes ---------------------------------------------------------
class WorkerProcess:
    """A worker in its own process, driven by the READY / GO / STOP line protocol
    shared by bench/bullpen_worker.py and `node bench/node/bench.mjs worker`."""

    def __init__(self, argv: list[str], label: str) -> None:
        self.label = label
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            bufsize=1,
        )
        self.lines: queue_mod.Queue[str | None] = queue_mod.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-2000:]

    def read_json(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue_mod.Empty:
                raise BenchError(
                    f"{self.label}: no reply within {timeout:.0f} s\n"
                    f"{self._stderr_tail()}"
                ) from None
            if line is None:
                raise BenchError(
                    f"{self.label}: exited ({self.proc.poll()})\n{self._stderr_tail()}"
                )
            line = line.strip()
            if line.startswith("{"):
                reply: dict[str, Any] = json.loads(line)
                return reply

    def send(self, word: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(word + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise BenchError(
                f"{self.label}: cannot send {word} ({exc})\n{self._stderr_tail()}"
            ) from None

    def finish(self, timeout: float = 20) -> None:
        """Wait for the process to exit after STOP."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise BenchError(
                f"{self.label}: did not exit within {timeout:.0f} s"
            ) from None

    def kill(self) -> None:
        """Make sure the process is gone (it is ours) and release its files."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        for f in (self.proc.stdin, self.proc.stdout, self.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


class Library:
    """How to add jobs and start a worker for one of the two libraries."""

    name = ""

    def __init__(self, url: str) -> None:
        self.url = url

    def bulk_add(self, queue: str, n: int, budget: Budget) -> float:
        raise NotImplementedError

    def worker(
        self,
        queue: str,
        concurrency: int,
        processor: str,
        sync: bool = False,
        cprofile: str | None = None,
    ) -> WorkerProcess:
        raise NotImplementedError

    def pickup_add(
        self, queue: str, n: int, interval_ms: float, budget: Budget
    ) -> None:
        raise NotImplementedError


class Bullpen(Library):
    name = "Bullpen"

    def bulk_add(self, queue: str, n: int, budget: Budget) -> float:
        jobs = [{"name": "noop", "data": {}} for _ in range(n)]
        with Queue(queue, connection=self.url) as q:
            q.client.ping()
            t0 = time.perf_counter()
            added = q.add_bulk(jobs)
            seconds = time.perf_counter() - t0
        if len(added) != n:
            raise BenchError(f"Bullpen add_bulk added {len(added)} of {n} jobs")
        return seconds

    def worker(
        self,
        queue: str,
        concurrency: int,
        processor: str,
        sync: bool = False,
        cprofile: str | None = None,
    ) -> WorkerProcess:
        argv = [
            sys.executable,
            str(BENCH / "bullpen_worker.py"),
            "--url",
            self.url,
            "--queue",
            queue,
            "--concurrency",
            str(concurrency),
            "--processor",
            processor,
        ]
        if sync:
            argv.append("--sync")
        if cprofile:
            argv += ["--cprofile", cprofile]
        return WorkerProcess(argv, f"Bullpen worker c={concurrency}")

    def pickup_add(
        self, queue: str, n: int, interval_ms: float, budget: Budget
    ) -> None:
        with Queue(queue, connection=self.url) as q:
            q.client.ping()
            start = time.perf_counter()
            for i in range(n):
                pause = start + i * interval_ms / 1000 - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                q.add("pickup", {"t": time.time() * 1000})
                if budget.left() <= 0:
                    raise BenchError("out of time while adding pickup jobs")


class BullMQ(Library):
    name = "BullMQ"

    def __init__(self, url: str, node: str) -> None:
        super().__init__(url)
        self.node = node
        self.script = str(NODE_DIR / "bench.mjs")

    def _run(self, args: list[str], timeout: float) -> dict[str, Any]:
        try:
            done = subprocess.run(
                [self.node, self.script, *args, "--url", self.url],
                cwd=NODE_DIR,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise BenchError(
                f"node bench.mjs {args[0]}: no result within {timeout:.0f} s"
            ) from None
        if done.returncode != 0:
            raise BenchError(
                f"node bench.mjs {args[0]} failed ({done.returncode}):\n"
                f"{done.stderr[-2000:]}"
            )
        reply: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return reply

    def version(self) -> dict[str, Any]:
        done = subprocess.run(
            [self.node, self.script, "version"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=30,
        )
        if done.returncode != 0:
            raise BenchError(done.stderr[-2000:])
        versions: dict[str, Any] = json.loads(done.stdout)
        return versions

    def bulk_add(self, queue: str, n: int, budget: Budget) -> float:
        reply = self._run(["add", "--queue", queue, "--jobs", str(n)], budget.cap(60))
        if reply["added"] != n:
            raise BenchError(f"BullMQ addBulk added {reply['added']} of {n} jobs")
        return float(reply["seconds"])

    def worker(
        self,
        queue: str,
        concurrency: int,
        processor: str,
        sync: bool = False,
        cprofile: str | None = None,
    ) -> WorkerProcess:
        argv = [
            self.node,
            self.script,
            "worker",
            "--url",
            self.url,
            "--queue",
            queue,
            "--concurrency",
            str(concurrency),
            "--processor",
            processor,
        ]
        return WorkerProcess(argv, f"BullMQ worker c={concurrency}")

    def pickup_add(
        self, queue: str, n: int, interval_ms: float, budget: Budget
    ) -> None:
        self._run(
            [
                "pickup-add",
                "--queue",
                queue,
                "--jobs",
                str(n),
                "--interval-ms",
                str(interval_ms),
            ],
            budget.cap(n * interval_ms / 1000 + 30),
        )


# --- measurements ---------------------------------------------------------------
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_us(pid: int) -> int | None:
    """User + system CPU time of a process (all threads) from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * 1_000_000 // CLOCK_TICKS


def wait_finished(r: redis.Redis, queue: str, n: int, timeout: float) -> int:
    """Poll until n jobs of the queue are completed or failed; returns how many are."""
    completed, failed = f"{PREFIX}:{queue}:completed", f"{PREFIX}:{queue}:failed"
    deadline = time.monotonic() + timeout
    while True:
        pipe = r.pipeline(transaction=False)
        pipe.zcard(completed)
        pipe.zcard(failed)
        done = int(sum(pipe.execute()))
        if done >= n or time.monotonic() > deadline:
            return done
        time.sleep(0.01)


def job_fields(r: redis.Redis, queue: str, fields: tuple[str, ...]) -> list[list[Any]]:
    """The given hash fields of every completed job of the queue."""
    ids = r.zrange(f"{PREFIX}:{queue}:completed", 0, -1)
    rows: list[list[Any]] = []
    for start in range(0, len(ids), 2000):
        pipe = r.pipeline(transaction=False)
        for job_id in ids[start : start + 2000]:
            pipe.hmget(f"{PREFIX}:{queue}:{job_id!s}", *fields)
        rows.extend(pipe.execute())
    return rows


def failed_count(r: redis.Redis, queue: str) -> int:
    return int(r.zcard(f"{PREFIX}:{queue}:failed"))


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


def percentile(values: list[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


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


def measure_all(
    libs: list[Library],
    r: redis.Redis,
    args: argparse.Namespace,
    budget: Budget,
    tag: str,
    notes: list[str],
) -> dict[str, dict[str, Any]]:
    """Every measure of every library, interleaved (each processing config runs
    for Bullpen, then at once for BullMQ) so that both see the same machine
    load. A measure that fails or runs out of time is noted and skipped."""
    out: dict[str, dict[str, Any]] = {
        lib.name: {"processing": {}, "processing_rounds": {}, "pickup": None}
        for lib in libs
    }
    configs = [(f"c{c}", c, False) for c in CONCURRENCIES]
    configs.append((f"c{SYNC_CONCURRENCY}-def", SYNC_CONCURRENCY, True))
    for round_no in range(args.rounds):
        # Alternate which library goes first, so neither always runs second.
        order = libs if round_no % 2 == 0 else libs[::-1]
        for key, concurrency, sync in configs:
            for lib in order:
                if sync and not isinstance(lib, Bullpen):
                    continue
                if budget.left() < 30:  # keep time for the pickup measures
                    notes.append(
                        f"{lib.name} {key} round {round_no + 1}: skipped, out of time"
                    )
                    continue
                queue = f"bench-{lib.name.lower()}-{key}-r{round_no}-{tag}"
                cprofile = None
                if (
                    args.cprofile
                    and isinstance(lib, Bullpen)
                    and concurrency == 50
                    and not sync
                    and round_no == 0
                ):
                    cprofile = args.cprofile
                what = " (def processor)" if sync else ""
                print(
                    f"  round {round_no + 1}/{args.rounds}, {lib.name}: "
                    f"{args.jobs} jobs, concurrency {concurrency}{what} ...",
                    file=sys.stderr,
                    flush=True,
                )
                try:
                    result = measure_processing(
                        lib,
                        r,
                        queue,
                        args.jobs,
                        concurrency,
                        budget,
                        sync=sync,
                        cprofile=cprofile,
                    )
                    out[lib.name]["processing_rounds"].setdefault(key, []).append(
                        result
                    )
                except BenchError as exc:
                    notes.append(f"{lib.name} {key} round {round_no + 1}: {exc}")
                finally:
                    r.flushdb()
    for result in out.values():
        # Interference from the rest of the machine only ever slows a run down,
        # so each configuration reports its fastest round (all are in the JSON).
        for key, rounds in result["processing_rounds"].items():
            result["processing"][key] = max(rounds, key=lambda p: p["jobs_per_s"])
    for lib in libs:
        if not args.pickup_jobs or budget.left() < 10:
            notes.append(f"{lib.name} pickup: skipped")
            continue
        print(
            f"  {lib.name}: pickup latency, {args.pickup_jobs} jobs "
            f"{args.pickup_interval_ms:g} ms apart ...",
            file=sys.stderr,
            flush=True,
        )
        try:
            out[lib.name]["pickup"] = measure_pickup(
                lib,
                r,
                f"bench-{lib.name.lower()}-pickup-{tag}",
                args.pickup_jobs,
                args.pickup_interval_ms,
                budget,
            )
        except BenchError as exc:
            notes.append(f"{lib.name} pickup: {exc}")
        finally:
            r.flushdb()
    for result in out.values():
        adds = [
            p["bulk_add_jobs_per_s"]
            for rounds in result["processing_rounds"].values()
            for p in rounds
        ]
        result["bulk_add_jobs_per_s"] = statistics.median(adds) if adds else None
        result["bulk_add_samples"] = adds
    return out


# --- report ---------------------------------------------------------------------
def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.2f}"
    return f"{value:,.0f}"


def table_rows(bp: dict[str, Any], bm: dict[str, Any] | None) -> list[dict[str, Any]]:
    """measure, Bullpen, BullMQ, ratio (> 1 = Bullpen better) rows."""
    rows: list[dict[str, Any]] = []

    def add(
        measure: str,
        unit: str,
        ours: float | None,
        theirs: float | None,
        higher_is_better: bool,
    ) -> None:
        ratio = None
        if ours and theirs:
            ratio = ours / theirs if higher_is_better else theirs / ours
        rows.append(
            {
                "measure": measure,
                "unit": unit,
                "bullpen": ours,
                "bullmq": theirs,
                "ratio": ratio,
            }
        )

    def proc(lib: dict[str, Any] | None, key: str, field: str) -> float | None:
        if lib is None or key not in lib["processing"]:
            return None
        value: float | None = lib["processing"][key][field]
        return value

    def pick(lib: dict[str, Any] | None, field: str) -> float | None:
        return lib["pickup"][field] if lib and lib.get("pickup") else None

    n = None
    for lib in (bp, bm):
        if lib and lib["processing"]:
            n = next(iter(lib["processing"].values()))["jobs"]
    add(
        f"bulk add {n or ''} jobs (jobs/s, median of runs)",
        "jobs/s",
        bp["bulk_add_jobs_per_s"],
        bm["bulk_add_jobs_per_s"] if bm else None,
        True,
    )
    for c in CONCURRENCIES:
        add(
            f"process c={c} (jobs/s)",
            "jobs/s",
            proc(bp, f"c{c}", "jobs_per_s"),
            proc(bm, f"c{c}", "jobs_per_s"),
            True,
        )
    add(
        f"process c={SYNC_CONCURRENCY}, def processor (jobs/s)",
        "jobs/s",
        proc(bp, f"c{SYNC_CONCURRENCY}-def", "jobs_per_s"),
        proc(bm, f"c{SYNC_CONCURRENCY}", "jobs_per_s"),
        True,
    )
    for c in CONCURRENCIES:
        add(
            f"worker CPU c={c} (us/job)",
            "us/job",
            proc(bp, f"c{c}", "cpu_us_per_job"),
            proc(bm, f"c{c}", "cpu_us_per_job"),
            False,
        )
    add(
        f"worker CPU c={SYNC_CONCURRENCY}, def processor (us/job)",
        "us/job",
        proc(bp, f"c{SYNC_CONCURRENCY}-def", "cpu_us_per_job"),
        proc(bm, f"c{SYNC_CONCURRENCY}", "cpu_us_per_job"),
        False,
    )
    for c in CONCURRENCIES:
        add(
            f"redis-server CPU c={c} (us/job)",
            "us/job",
            proc(bp, f"c{c}", "redis_cpu_us_per_job"),
            proc(bm, f"c{c}", "redis_cpu_us_per_job"),
            False,
        )
    add("pickup p50 (ms)", "ms", pick(bp, "p50_ms"), pick(bm, "p50_ms"), False)
    add("pickup p99 (ms)", "ms", pick(bp, "p99_ms"), pick(bm, "p99_ms"), False)
    add(
        "pickup p50, processedOn-timestamp (ms)",
        "ms",
        pick(bp, "redis_p50_ms"),
        pick(bm, "redis_p50_ms"),
        False,
    )
    add(
        "pickup p99, processedOn-timestamp (ms)",
        "ms",
        pick(bp, "redis_p99_ms"),
        pick(bm, "redis_p99_ms"),
        False,
    )
    return rows


def print_table(rows: list[dict[str, Any]], with_bullmq: bool) -> None:
    header: tuple[str, ...] = ("measure", "Bullpen", "BullMQ", "ratio")
    body: list[tuple[str, ...]] = [
        (
            r["measure"],
            fmt(r["bullpen"], r["unit"]),
            fmt(r["bullmq"], r["unit"]),
            f"{r['ratio']:.2f}x" if r["ratio"] else "-",
        )
        for r in rows
    ]
    if not with_bullmq:
        header, body = header[:2], [row[:2] for row in body]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    line = "+".join("-" * (w + 2) for w in widths)
    print(
        " | ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=False))
        )
    )
    print(line)
    for row in body:
        print(
            " | ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=False))
            )
        )


def targets(bp: dict[str, Any], bm: dict[str, Any] | None) -> list[str]:
    """The issue's targets that this run can check."""
    out = []
    ours = bp["processing"].get("c50", {}).get("jobs_per_s")
    if bm and ours and bm["processing"].get("c50"):
        ratio = ours / bm["processing"]["c50"]["jobs_per_s"]
        out.append(
            f"processing at c=50 >= 1.0x BullMQ: {ratio:.2f}x "
            f"({'met' if ratio >= 1.0 else 'NOT met'})"
        )
    if bm and bp.get("pickup") and bm.get("pickup"):
        a, b = bp["pickup"]["p99_ms"], bm["pickup"]["p99_ms"]
        out.append(
            f"pickup p99 no worse than BullMQ: {a:.2f} ms vs {b:.2f} ms "
            f"({'met' if a <= b else 'NOT met'})"
        )
    return out


# --- main -------------------------------------------------------------------------
def node_status(args: argparse.Namespace) -> tuple[str | None, str]:
    """(node binary, '') when BullMQ can be measured, else (None, why not)."""
    if args.no_node:
        return None, "BullMQ skipped (--no-node)"
    node = shutil.which("node")
    if not node:
        return None, "node not found on PATH: BullMQ figures skipped, Bullpen only"
    if not (NODE_DIR / "node_modules" / "bullmq").is_dir():
        return None, (
            "bench/node/node_modules is missing (run `make node-deps`): "
            "BullMQ figures skipped, Bullpen only"
        )
    return node, ""


def redis_version(r: redis.Redis) -> str:
    return str(r.info("server").get("redis_version"))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", type=int, default=10_000, help="jobs per processing run"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="processing runs per configuration; the fastest is reported",
    )
    parser.add_argument("--pickup-jobs", type=int, default=200)
    parser.add_argument("--pickup-interval-ms", type=float, default=20.0)
    parser.add_argument("--no-node", action="store_true", help="measure Bullpen only")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=170.0,
        help="overall time limit; measures left when it runs out are skipped",
    )
    parser.add_argument(
        "--cprofile",
        metavar="FILE",
        help="cProfile the Bullpen c=50 worker into FILE (slows it down)",
    )
    parser.add_argument(
        "--output", help="JSON file (default bench/results/throughput-*.json)"
    )
    args = parser.parse_args()

    budget = Budget(args.budget_s)
    started = datetime.now(UTC)
    tag = started.strftime("%Y%m%d%H%M%S")
    notes: list[str] = []
    node, why = node_status(args)

    server = RedisServer().start()
    try:
        r = redis.Redis(port=server.port, decode_responses=True)
        env: dict[str, Any] = {
            "redis_server": find_redis_server(),
            "redis_version": redis_version(r),
            "redis_port": server.port,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        }
        print(
            f"redis-server {env['redis_version']} ({env['redis_server']}) on port "
            f"{server.port}; Python {env['python']}; {env['cpus']} CPUs",
            file=sys.stderr,
        )
        bullmq_lib: BullMQ | None = None
        if node:
            bullmq_lib = BullMQ(server.url, node)
            try:
                env.update(bullmq_lib.version())
                print(
                    f"Node {env['node']}, bullmq {env['bullmq']}, "
                    f"ioredis {env['ioredis']}",
                    file=sys.stderr,
                )
            except (BenchError, subprocess.SubprocessError, ValueError) as exc:
                why = f"node bench.mjs does not run ({exc}): BullMQ figures skipped"
                bullmq_lib = None
        if why:
            print(why)
            notes.append(why)

        # Warm up: load both libraries' scripts into the server.
        Bullpen(server.url).bulk_add(f"bench-warmup-bullpen-{tag}", 100, budget)
        if bullmq_lib:
            try:
                bullmq_lib.bulk_add(f"bench-warmup-bullmq-{tag}", 100, budget)
            except BenchError as exc:
                notes.append(f"BullMQ warm-up: {exc}")
        r.flushdb()

        libs: list[Library] = [Bullpen(server.url)]
        if bullmq_lib:
            libs.append(bullmq_lib)
        measured = measure_all(libs, r, args, budget, tag, notes)
        bp = measured["Bullpen"]
        bm = measured.get("BullMQ")
    finally:
        server.stop()

    rows = table_rows(bp, bm)
    print()
    versus = (
        f"vs BullMQ {env['bullmq']} (Node {env['node']})"
        if bm
        else "(BullMQ not measured)"
    )
    print(
        f"Bullpen {versus}, redis {env['redis_version']}, {env['cpus']} CPUs, "
        f"one worker process, {args.jobs} no-op jobs per run, best of {args.rounds}"
    )
    print_table(rows, bm is not None)
    if bm:
        print(
            "ratio > 1 = Bullpen better (jobs/s: Bullpen/BullMQ; us and ms: "
            "BullMQ/Bullpen). The def-processor rows compare with BullMQ at the same "
            "concurrency."
        )
    print(
        f"pickup: {args.pickup_jobs} jobs, {args.pickup_interval_ms:g} ms apart, "
        "idle worker at c=1; processor start - adder's time before add "
        "(processedOn-timestamp rows: 1 ms resolution)"
    )
    for line in targets(bp, bm):
        print("target: " + line)
    for note in notes:
        print("note: " + note.splitlines()[0])

    result = {
        "started": started.isoformat(),
        "seconds": round(args.budget_s - budget.left(), 1),
        "config": {
            "jobs": args.jobs,
            "rounds": args.rounds,
            "concurrency": list(CONCURRENCIES),
            "sync_concurrency": SYNC_CONCURRENCY,
            "pickup_jobs": args.pickup_jobs,
            "pickup_interval_ms": args.pickup_interval_ms,
        },
        "env": env,
        "bullpen": bp,
        "bullmq": bm,
        "table": rows,
        "targets": targets(bp, bm),
        "notes": notes,
    }
    out = Path(args.output) if args.output else RESULTS / f"throughput-{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if args.cprofile:
        import pstats

        print(
            f"\ncProfile of the Bullpen c=50 worker ({args.cprofile}), "
            "top 25 by own time:"
        )
        pstats.Stats(args.cprofile).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
