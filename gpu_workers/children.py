"""One managed worker process of a supervisor: its state, restart history,
how it is started, and the record shown while it has no live process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field
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
    """One (queue, GPU) worker process and its restart history."""

    queue: QueueConfig
    gpu: GpuInfo
    budget_bytes: int
    state: ChildState = ChildState.STOPPED
    proc: subprocess.Popen[bytes] | None = None
    crashes: deque[float] = field(default_factory=deque)
    restarts: int = 0
    restart_at: float = 0.0
    drain_deadline: float = 0.0
    last_exit: int | None = None
    reason: str = ""

    @property
    def slot(self) -> tuple[str, str]:
        """(prefix:queue, GPU uuid)."""
        return (self.queue.key, self.gpu.uuid)

    @property
    def pid(self) -> int | None:
        """The live process id."""
        return self.proc.pid if self.proc is not None else None

    def worker_id(self, host: str) -> str:
        """The id its heartbeats are published under."""
        return worker_id(host, self.queue.prefix, self.queue.queue, self.gpu.uuid)


def worker_spec(child: Child, cfg: SupervisorConfig, slots: int) -> WorkerSpec:
    """What the worker process of a (queue, GPU) is handed."""
    q = child.queue
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
    )


def spawn(child: Child, cfg: SupervisorConfig, slots: int) -> None:
    """Start the worker process of a (queue, GPU), pinned with
    CUDA_VISIBLE_DEVICES=<uuid>; `child` becomes RUNNING."""
    spec = worker_spec(child, cfg, slots)
    env = dict(os.environ, **cfg.child_env)
    env["CUDA_VISIBLE_DEVICES"] = child.gpu.uuid
    env["PYTHONPATH"] = child_pythonpath(env.get("PYTHONPATH", ""))
    out: Any = None
    if cfg.log_dir:
        Path(cfg.log_dir).mkdir(parents=True, exist_ok=True)
        name = spec.worker_id.replace(":", "_") + ".log"
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
    send_on_stdin(child.proc, spec.to_json())
    child.state = ChildState.RUNNING


def send_on_stdin(proc: subprocess.Popen[bytes], text: str) -> None:
    """Write `text` to a process's stdin pipe and close it (a process that
    died at once is left for the reap loop to see)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass


def child_record(child: Child, host: str) -> dict[str, Any]:
    """The record published for a child without a live process (restarting
    or failed), shaped like a worker heartbeat."""
    state = "failed" if child.state is ChildState.FAILED else "starting"
    return {
        "id": child.worker_id(host),
        "host": host,
        "pid": None,
        "queue": child.queue.queue,
        "prefix": child.queue.prefix,
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
