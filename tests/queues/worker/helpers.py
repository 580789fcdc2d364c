"""Plain helpers of the worker tests: waiting with a deadline, running a
worker in a background thread or in its own process, and reading what the
test processors recorded in Redis."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any, TypeVar

import redis

from queues import Worker
from tests.helpers import wait_until

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[3]


def now_ms() -> int:
    """Wall-clock ms, the clock the worker writes processedOn with."""
    return int(time.time() * 1000)


def rec_key(qname: str, what: str) -> str:
    """A key where the test processors record what they did (outside `bull:`)."""
    return f"test:{qname}:{what}"


# --- a worker in a thread ----------------------------------------------------
class WorkerThread:
    """A `Worker` whose blocking run() runs in a daemon thread."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(
            target=self._run, name=f"worker-{worker.name}", daemon=True
        )

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop()
            self.errors.append(exc)

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self, timeout: float = 15.0) -> None:
        """close() the worker and join its thread; raise what run() raised."""
        self.worker.close()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"worker thread did not stop within {timeout}s")
        if self.errors:
            raise self.errors[0]


def close_forced(handle: WorkerThread, timeout: float = 15.0) -> float:
    """close(force=True) the worker and join its thread (it must stop, and
    run() must not have raised); the seconds that took."""
    began = time.monotonic()
    handle.worker.close(force=True)
    handle.thread.join(timeout)
    assert not handle.alive and not handle.errors
    return time.monotonic() - began


def start_worker_thread(
    qname: str, processor: Callable[..., Any], url: str, **options: Any
) -> WorkerThread:
    """Start `Worker(qname, processor, connection=url, **options).run()` in a thread."""
    handle = WorkerThread(Worker(qname, processor, connection=url, **options))
    handle.thread.start()
    return handle


@contextmanager
def worker_thread(
    qname: str, processor: Callable[..., Any], url: str, **options: Any
) -> Iterator[WorkerThread]:
    """A worker running in a thread for the duration of the block."""
    handle = start_worker_thread(qname, processor, url, **options)
    try:
        yield handle
    finally:
        handle.stop()


# --- a worker in its own process ---------------------------------------------
class WorkerProcess:
    """A worker started by `tests/queues/worker/worker_proc.py`."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait(self, timeout: float) -> int:
        """The exit status; AssertionError (with the log) if it has not exited."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"worker process {self.pid} still running after {timeout}s; log:\n"
                + self.log()
            ) from None

    def kill(self) -> None:
        """SIGKILL and reap (idempotent)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def start_worker_process(
    url: str,
    qname: str,
    log_dir: Path,
    *,
    sync: bool = False,
    hang: bool = False,
    **options: Any,
) -> WorkerProcess:
    """Start a worker process on `qname`; `options` are AsyncWorker keyword arguments.

    sync: a plain `def` processor instead of `async def`.
    hang: every job sleeps (practically) forever once it has started.
    """
    config = {
        "url": url,
        "queue": qname,
        "sync": sync,
        "hang": hang,
        "options": options,
    }
    log_path = log_dir / f"worker-{qname}-{time.monotonic_ns()}.log"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.queues.worker.worker_proc",
                json.dumps(config),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return WorkerProcess(proc, log_path)


def wait_ready(
    r: redis.Redis, qname: str, workers: list[WorkerProcess], timeout: float = 20.0
) -> None:
    """Wait until every process has built its worker and is about to run it."""

    def ready() -> bool:
        for w in workers:
            if w.proc.poll() is not None:
                raise AssertionError(
                    f"worker process {w.pid} exited with "
                    f"{w.proc.returncode}; log:\n{w.log()}"
                )
        pids = set(r.lrange(rec_key(qname, "ready"), 0, -1))
        return {str(w.pid) for w in workers} <= pids

    wait_until(ready, timeout, 0.02, "the worker processes to start")


def terminate_all(workers: list[WorkerProcess], timeout: float = 15.0) -> list[int]:
    """SIGTERM every process, then their exit statuses (SIGKILL after timeout)."""
    for w in workers:
        w.signal(signal.SIGTERM)
    codes = []
    deadline = time.monotonic() + timeout
    for w in workers:
        try:
            codes.append(w.proc.wait(max(deadline - time.monotonic(), 0.1)))
        except subprocess.TimeoutExpired:
            w.kill()
            codes.append(w.proc.returncode)
    return codes


# --- reading what the processors recorded --------------------------------------
def started(r: redis.Redis, qname: str) -> list[dict[str, Any]]:
    """One entry per processor start, in order: {id, pid, ms, running}."""
    return [json.loads(e) for e in r.lrange(rec_key(qname, "started"), 0, -1)]


def counts(r: redis.Redis, qname: str, what: str = "done") -> dict[str, int]:
    """Job id -> times the processor started (`starts`) or finished (`done`) it."""
    return {k: int(v) for k, v in r.hgetall(rec_key(qname, what)).items()}


def gaps(times: list[float]) -> list[float]:
    """Differences between consecutive values."""
    return [b - a for a, b in pairwise(times)]
