"""One managed worker process of a supervisor: its state, restart history,
how it is started, and the record shown while it has no live process.

A child is the process of one (queue, GPU), or with process_per_gpu the one
process of a GPU serving several queues (`queues`; gpu_process.py). Either
way the host record and the worker records list one entry per (queue, GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from .clock import now_ms
from .config import QueueConfig, SupervisorConfig, WorkerSpec, worker_id
from .probe import GpuInfo

REPO_ROOT = Path(__file__).resolve().parent.parent


def child_pythonpath(existing: str, root: Path = REPO_ROOT) -> str:
    """PYTHONPATH of a worker process: the checkout holding gpu_workers first
    (a supervisor started from a checkout, with another current directory),
    but not an installed package's site-packages, which every interpreter of
    the venv finds anyway and which, on PYTHONPATH, would come before the
    standard library."""
    site_dirs = {Path(p).resolve() for p in sys.path if p}
    source = root.resolve()
    own = "" if source in site_dirs and source.name in SITE_DIRS else str(source)
    return os.pathsep.join(p for p in (own, existing) if p)


#: The first part of a GPU process's key in the supervisor's children.
GPU_PROCESS = "*"

#: Names of the folders installed packages live in.
SITE_DIRS = ("site-packages", "dist-packages")


class ChildState(str, Enum):  # noqa: UP042 - house style (JobState)
    """Where one managed worker process is."""

    RUNNING = "running"
    BACKOFF = "backoff"
    DRAINING = "draining"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass
class Child:
    """One (queue, GPU) worker process, or one GPU's process serving
    `queues` (then `queue` is the first of them), and its restart history."""

    queue: QueueConfig
    gpu: GpuInfo
    budget_bytes: int
    state: ChildState = ChildState.STOPPED
    proc: subprocess.Popen[bytes] | None = None
    crashes: deque[float] = field(default_factory=deque)
    #: When its process recycled itself (EXIT_RECYCLE), within the window.
    recycles: deque[float] = field(default_factory=deque)
    restarts: int = 0
    restart_at: float = 0.0
    drain_deadline: float = 0.0
    last_exit: int | None = None
    reason: str = ""
    #: A GPU process's queues (empty: a process of `queue` alone).
    queues: tuple[QueueConfig, ...] = ()

    @property
    def per_gpu(self) -> bool:
        """Whether it is one GPU's process serving `queues`."""
        return bool(self.queues)

    @property
    def served(self) -> tuple[QueueConfig, ...]:
        """The queues its process serves."""
        return self.queues or (self.queue,)

    @property
    def slot(self) -> tuple[str, str]:
        """(prefix:queue, GPU uuid), or (GPU_PROCESS, GPU uuid)."""
        return (GPU_PROCESS if self.per_gpu else self.queue.key, self.gpu.uuid)

    @property
    def pid(self) -> int | None:
        """The live process id."""
        return self.proc.pid if self.proc is not None else None

    def worker_id(self, host: str) -> str:
        """The id its (first queue's) heartbeats are published under; for a
        GPU process, its name in logs."""
        if self.per_gpu:
            return f"{host}:{GPU_PROCESS}:{self.gpu.uuid}"
        return worker_id(host, self.queue.prefix, self.queue.queue, self.gpu.uuid)

    def crashed(self, code: int, now: float, cfg: SupervisorConfig) -> bool:
        """Its process exited with `code` unasked: BACKOFF with a growing
        delay, or FAILED (returns True) after more than `max_restarts`
        crashes within `restart_window_s` (an OTP-style restart intensity)."""
        self.crashes.append(now)
        while self.crashes and self.crashes[0] < now - cfg.restart_window_s:
            self.crashes.popleft()
        if len(self.crashes) > cfg.max_restarts:
            self.state = ChildState.FAILED
            self.reason = (
                f"gave up: {len(self.crashes)} crashes within "
                f"{cfg.restart_window_s:g}s (limit {cfg.max_restarts} "
                f"restarts); last exit status {code}"
            )
            return True
        delay = min(
            cfg.backoff_initial_s * 2 ** (len(self.crashes) - 1), cfg.backoff_max_s
        )
        self.state = ChildState.BACKOFF
        self.restart_at = now + delay
        self.reason = f"exited with status {code}; restarting in {delay:.1f}s"
        return False

    def recycled(self, code: int, now: float, cfg: SupervisorConfig) -> bool:
        """Its process exited to be started afresh (EXIT_RECYCLE: VRAM it
        could not give back kept its jobs out): restarted at once, not
        counted as a crash, unless it did so more than `max_restarts` times
        within `restart_window_s` (a leak at every load), which counts as a
        crash (crashed()). Returns True when that made it FAILED."""
        self.recycles.append(now)
        while self.recycles and self.recycles[0] < now - cfg.restart_window_s:
            self.recycles.popleft()
        if len(self.recycles) > cfg.max_restarts:
            failed = self.crashed(code, now, cfg)
            self.reason = (
                f"{self.reason} (recycled {len(self.recycles)} times within "
                f"{cfg.restart_window_s:g}s to free VRAM it could not give back)"
            )
            return failed
        self.state = ChildState.BACKOFF
        self.restart_at = now
        self.reason = (
            "recycled to free VRAM its process could not give back; restarting now"
        )
        return False

    def worker_ids(self, host: str) -> list[str]:
        """The ids of its queues' worker records."""
        return [worker_id(host, q.prefix, q.queue, self.gpu.uuid) for q in self.served]


def spawn(
    child: Child, cfg: SupervisorConfig, slots: Mapping[str, int], alive_file: str = ""
) -> None:
    """Start the worker process of a (queue, GPU), or of a GPU with all its
    queues, pinned with CUDA_VISIBLE_DEVICES=<uuid>; `slots` by queue key;
    `alive_file`: the liveness file its supervisor vouches for it by
    (heartbeat.py); `child` becomes RUNNING."""
    specs = [spec_of(child, cfg, q, slots[q.key], alive_file) for q in child.served]
    text = (
        json.dumps([asdict(s) for s in specs]) if child.per_gpu else specs[0].to_json()
    )
    env = dict(os.environ, **cfg.child_env)
    env["CUDA_VISIBLE_DEVICES"] = child.gpu.uuid
    env["PYTHONPATH"] = child_pythonpath(env.get("PYTHONPATH", ""))
    out: Any = None
    if cfg.log_dir:
        Path(cfg.log_dir).mkdir(parents=True, exist_ok=True)
        name = child.worker_id(cfg.host).replace(":", "_").replace("*", "gpu") + ".log"
        out = open(Path(cfg.log_dir) / name, "ab")  # noqa: SIM115 - child owns it
    try:
        # The spec (Redis URL and password included) goes through a pipe,
        # never argv: a command line is readable by anyone on the host (ps).
        child.proc = subprocess.Popen(
            [cfg.python, "-m", "gpu_workers.child"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT if out is not None else None,
        )
    finally:
        if out is not None:
            out.close()
    send_on_stdin(child.proc, text)
    child.state = ChildState.RUNNING


def spec_of(
    child: Child,
    cfg: SupervisorConfig,
    q: QueueConfig,
    slots: int,
    alive_file: str = "",
) -> WorkerSpec:
    """The spec of one queue's worker in a child's process."""
    return WorkerSpec(
        redis_url=cfg.redis_url,
        host=cfg.host,
        queue=q.queue,
        prefix=q.prefix,
        gpu_uuid=child.gpu.uuid,
        gpus=cfg.gpus,
        budget_bytes=child.budget_bytes,
        slots=min(slots, q.max_slots),
        max_slots=q.max_slots,
        handler_modules=list(cfg.handler_modules),
        namespace=cfg.namespace,
        context_bytes=cfg.context_bytes,
        heartbeat_interval_s=cfg.heartbeat_interval_s,
        heartbeat_ttl_s=cfg.heartbeat_ttl_s,
        control_interval_s=cfg.control_interval_s,
        lock_duration_ms=q.lock_duration_ms,
        stalled_interval_ms=q.stalled_interval_ms,
        max_stalled_count=q.max_stalled_count,
        drain_timeout_s=cfg.drain_timeout_s,
        metrics_data_points=cfg.metrics_data_points,
        gpu_time_hours_kept=cfg.gpu_time_hours_kept,
        gpu_time_days_kept=cfg.gpu_time_days_kept,
        gpu_time_max_keys=cfg.gpu_time_max_keys,
        placement=cfg.placement,
        placement_age_bound_s=cfg.placement_age_bound_s,
        placement_cold_hold_s=cfg.placement_cold_hold_s,
        placement_scan=cfg.placement_scan,
        restarts=child.restarts,
        log_level=cfg.log_level,
        log_format=cfg.log_format,
        alive_file=alive_file,
    )


def send_on_stdin(proc: subprocess.Popen[bytes], text: str) -> None:
    """Write `text` to a process's stdin pipe and close it (a process that
    died at once is left for the reap loop to see)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass


def child_entries(child: Child, host: str) -> list[dict[str, Any]]:
    """Its entries in the host record's `children`: one per queue it serves,
    all with the same pid and state."""
    return [
        {
            "id": wid,
            "state": child.state.value,
            "pid": child.pid,
            "restarts": child.restarts,
            "last_exit": child.last_exit,
            "reason": child.reason,
        }
        for wid in child.worker_ids(host)
    ]


def child_records(child: Child, host: str) -> list[tuple[str, dict[str, Any]]]:
    """(worker id, record) per queue it serves, for a child without a live
    process (restarting or failed)."""
    return [
        (wid, child_record(child, host, q))
        for wid, q in zip(child.worker_ids(host), child.served, strict=True)
    ]


def child_record(
    child: Child, host: str, q: QueueConfig | None = None
) -> dict[str, Any]:
    """The record published for a child without a live process (restarting
    or failed), shaped like a worker heartbeat; `q`: which of its queues."""
    q = q or child.queue
    state = "failed" if child.state is ChildState.FAILED else "starting"
    record: dict[str, Any] = {
        "id": worker_id(host, q.prefix, q.queue, child.gpu.uuid),
        "host": host,
        "pid": None,
        "queue": q.queue,
        "prefix": q.prefix,
        "gpu": {
            "uuid": child.gpu.uuid,
            "index": child.gpu.index,
            "name": child.gpu.name,
            "simulated": child.gpu.simulated,
        },
        "simulated": child.gpu.simulated,
        "slots": 0,
        "budget_bytes": child.budget_bytes,
        "committed_bytes": 0,
        "free_bytes": child.budget_bytes,
        "running": [],
        "counters": {},
        "restarts": child.restarts,
        "state": state,
        "reason": child.reason,
        "last_exit": child.last_exit,
        "ts_ms": now_ms(),
    }
    if child.per_gpu:
        record["process"] = {"pid": None, "queues": [c.key for c in child.served]}
    return record
