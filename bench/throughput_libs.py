"""The two libraries under test in bench/throughput.py: Bullpen and Node BullMQ,
driven the same way (a worker in its own process, adds from this one)."""

from __future__ import annotations

import json
import os
import queue as queue_mod
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
NODE_DIR = BENCH / "node"
sys.path.insert(0, str(ROOT))

from queues import Queue  # noqa: E402

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

    def run_json(self, args: list[str], timeout: float) -> dict[str, Any]:
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
        reply = self.run_json(
            ["add", "--queue", queue, "--jobs", str(n)], budget.cap(60)
        )
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
        self.run_json(
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


def percentile(values: list[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
