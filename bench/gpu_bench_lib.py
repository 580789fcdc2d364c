"""Shared by bench/packing.py and bench/gpu_check.py: a throwaway Redis, a
supervisor (`python -m gpu_workers`) in its own process group, running a
batch of jobs to completion, and reading what the workers published.

Needs only Python, redis-py (+ orjson, which the queue core uses) and a
redis-server binary: no Django.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from gpu_workers.children import send_on_stdin  # noqa: E402
from gpu_workers.fleet import Fleet  # noqa: E402
from queues import Queue  # noqa: E402
from queues.devredis import RedisServer  # noqa: E402

GiB = 2**30


def gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


class SupervisorRun:
    """A supervisor process with its logs in a temporary folder."""

    def __init__(
        self,
        redis_url: str,
        host: str,
        gpus: str,
        queues: list[dict[str, Any]],
        handler_modules: list[str],
        **overrides: Any,
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"bullpen-{host}-"))
        self.config = {
            "redis_url": redis_url,
            "host": host,
            "gpus": gpus,
            "queues": queues,
            "handler_modules": handler_modules,
            "heartbeat_interval_s": 0.5,
            "heartbeat_ttl_s": 3.0,
            "log_dir": str(self.dir),
            "log_level": "WARNING",
            **overrides,
        }
        self.log_path = self.dir / "supervisor.log"
        # The repo first, and whatever PYTHONPATH already holds (on a GPU
        # machine, the folder bench/gpu_device.sh installed the wheels in).
        path = os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
        )
        env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gpu_workers",
                    "--config",
                    "-",
                ],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE,
                start_new_session=True,
            )
        send_on_stdin(self.proc, json.dumps(self.config))

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM (drain), SIGKILL the group if it does not exit in time;
        then remove the log folder (print `logs()` before, when they count)."""
        try:
            return self._stop(timeout)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _stop(self, timeout: float) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self.proc.wait(10)

    def logs(self, tail: int = 3000) -> str:
        parts = []
        for path in sorted(self.dir.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll until truthy; RuntimeError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def run_batch(queue: Queue, jobs: list[dict[str, Any]], timeout: float) -> float:
    """Add the jobs and return the seconds until every one of them finished."""
    before = queue.get_counts("completed", "failed")
    base = before["completed"] + before["failed"]
    start = time.monotonic()
    queue.add_bulk(jobs)

    def finished() -> bool:
        c = queue.get_counts("completed", "failed")
        return c["completed"] + c["failed"] >= base + len(jobs)

    wait_for(finished, timeout, "the batch to finish", 0.05)
    return time.monotonic() - start


def heartbeats(
    r: redis.Redis, since: str = "-", namespace: str = "bullpen"
) -> list[dict[str, Any]]:
    """Worker heartbeats published on the workers stream since an id."""
    out = []
    for _, fields in r.xrange(f"{namespace}:stream:workers", since, "+"):
        if fields.get("kind") == "worker" and fields.get("record"):
            record = json.loads(fields["record"])
            if "committed_bytes" in record:
                out.append(record)
    return out


def max_overlap(records: list[dict[str, Any]]) -> dict[str, int]:
    """Per GPU, the most declared VRAM admitted at one moment (from the
    admitted/released timestamps recorded with each job)."""
    events: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for rec in records:
        if rec and "admitted_us" in rec:
            events[rec["gpu"]] += [
                (rec["admitted_us"], rec["declared_bytes"]),
                (rec["released_us"], -rec["declared_bytes"]),
            ]
    worst: dict[str, int] = {}
    for gpu, timeline in events.items():
        level = peak = 0
        for _, delta in sorted(timeline):
            level += delta
            peak = max(peak, level)
        worst[gpu] = peak
    return worst


__all__ = [
    "Fleet",
    "GiB",
    "Queue",
    "RedisServer",
    "SupervisorRun",
    "gib",
    "heartbeats",
    "max_overlap",
    "run_batch",
    "wait_for",
]
