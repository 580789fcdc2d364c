"""Plain helpers of the GPU worker tests: bounded waits, a supervisor in its
own process, a GpuWorker in a thread, and reading the workers stream."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import redis

from gpu_workers.config import WorkerSpec
from gpu_workers.probe import GpuProbe, SimulatedProbe
from gpu_workers.worker import GpuWorker

T = TypeVar("T")
REPO_ROOT = Path(__file__).resolve().parents[2]

#: Fast settings for tests: short heartbeats, restarts and stalled checks.
FAST = {
    "heartbeat_interval_s": 0.2,
    "heartbeat_ttl_s": 1.0,
    "reconcile_interval_s": 0.2,
    "control_interval_s": 0.05,
    "backoff_initial_s": 0.1,
    "backoff_max_s": 0.5,
    "drain_timeout_s": 10.0,
}


class SupervisorProcess:
    """`python -m gpu_workers --config ...` in its own session (process group)."""

    def __init__(self, config: dict[str, Any], log_path: Path) -> None:
        self.config = config
        self.log_path = log_path
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpu_workers", "--config", json.dumps(config)],
            cwd=REPO_ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for the exit status (SIGKILL the group after timeout)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            raise AssertionError(
                f"supervisor did not drain within {timeout}s"
            ) from None

    def kill_group(self) -> None:
        """SIGKILL the supervisor and every worker it started (a dead host)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None or _group_alive(self.proc.pid):
            self.kill_group()
        self._log.close()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def supervisor_config(
    redis_url: str,
    queues: list[dict[str, Any]],
    host: str,
    gpus: str = "sim:1x24GiB",
    **overrides: Any,
) -> dict[str, Any]:
    """A SupervisorConfig as JSON-ready dict with the fast test settings."""
    config: dict[str, Any] = {
        "redis_url": redis_url,
        "host": host,
        "gpus": gpus,
        "queues": queues,
        "handler_modules": [
            "gpu_workers.demo_handlers",
            "tests.gpu_workers.handlers_for_tests",
        ],
        "log_level": "INFO",
        **FAST,
    }
    config.update(overrides)
    return config


def make_spec(
    redis_url: str, queue: str, gpu_uuid: str = "SIM-t-0", **overrides: Any
) -> WorkerSpec:
    """A WorkerSpec for an in-process GpuWorker on simulated GPU 0 of host `t`."""
    fields: dict[str, Any] = {
        "redis_url": redis_url,
        "host": "t",
        "queue": queue,
        "prefix": "bull",
        "gpu_uuid": gpu_uuid,
        "gpus": "sim:1x24GiB",
        "budget_bytes": 20 << 30,
        "slots": 3,
        "max_slots": 8,
        "handler_modules": [],
        "heartbeat_interval_s": 0.1,
        "heartbeat_ttl_s": 1.0,
        "control_interval_s": 0.05,
        "drain_timeout_s": 5.0,
    }
    fields.update(overrides)
    return WorkerSpec(**fields)


class LoopThread:
    """Something with `run(install_signals=False)` and `close()` (a GpuWorker,
    a GpuProcess), built by `build` and run on an event loop in a daemon
    thread; stop() closes it (a drain) and joins."""

    def __init__(self, build: Callable[[], Any], what: str = "worker") -> None:
        self._build = build
        self._what = what
        self.target: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not self._ready.wait(10):
            raise AssertionError(f"{what} thread did not start")
        if self.error:
            raise self.error

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self.target = self._build()
            self._ready.set()
            await self.target.run(install_signals=False)

        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - surfaced by stop()
            self.error = exc
            self._ready.set()

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def _dump_tasks(self) -> None:
        """Print where the tasks are stuck (for a failing stop())."""
        loop = self.loop
        if loop is None:
            return

        def dump() -> None:
            for task in asyncio.all_tasks(loop):
                task.print_stack()

        loop.call_soon_threadsafe(dump)
        time.sleep(0.5)

    def stop(self, timeout: float = 15.0) -> None:
        """close() it (a drain) and join the thread."""
        if self.loop is not None and self.target is not None and self.alive:
            self.loop.call_soon_threadsafe(self.target.close)
        self.thread.join(timeout)
        if self.thread.is_alive():
            self._dump_tasks()
            raise AssertionError(f"{self._what} did not stop within {timeout}s")
        if self.error:
            raise self.error


class WorkerThread(LoopThread):
    """A GpuWorker built and run on an event loop in a daemon thread."""

    def __init__(self, spec: WorkerSpec, probe: GpuProbe | None = None) -> None:
        self.spec = spec
        self.probe = probe or SimulatedProbe(spec.gpus, host=spec.host)
        super().__init__(lambda: GpuWorker(self.spec, self.probe))

    @property
    def worker(self) -> GpuWorker | None:
        """The GpuWorker (None until built)."""
        worker: GpuWorker | None = self.target
        return worker


def read_stream(
    r: redis.Redis, key: str = "bullpen:stream:workers", kind: str = "worker"
) -> list[dict[str, Any]]:
    """Every record of `kind` in the workers stream, oldest first."""
    out = []
    for _, fields in r.xrange(key):
        if fields.get("kind") == kind:
            out.append(json.loads(fields["record"]))
    return out
