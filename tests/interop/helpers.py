"""Driving real Node.js BullMQ (node/bull.mjs) and worker processes from the
interop tests: one-shot calls, long-running processes that speak JSON lines,
and an in-process Python worker. Every wait here is bounded."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from queues import AsyncWorker, Job
from queues.cluster import is_cluster_url
from tests.helpers import wait_until

from .behaviour import behave

HERE = Path(__file__).resolve().parent
BULL = HERE / "node" / "bull.mjs"
ROOT = HERE.parent.parent


def redis_arg(redis_url: str) -> str:
    """How node/bull.mjs and parity.mjs are told where Redis is: the port of
    a redis:// URL (a server on 127.0.0.1), a redis+cluster:// URL as it is
    (they then connect an ioredis Cluster; see node/connection.mjs)."""
    if is_cluster_url(redis_url):
        return redis_url
    return str(urlparse(redis_url).port)


def json_arg(value: Any) -> str:
    """A JSON argument for bull.mjs; big ones go through a temp file (@path)."""
    text = json.dumps(value)
    if len(text) < 50_000:
        return text
    fd, path = tempfile.mkstemp(prefix="bullpen-interop-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return "@" + path


def node(redis_url: str, *args: Any, timeout: float = 60) -> Any:
    """Run one bull.mjs command to completion; its JSON output."""
    argv = ["node", str(BULL), redis_arg(redis_url)]
    argv += [a if isinstance(a, str) else json_arg(a) for a in args]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, cwd=HERE
    )
    if done.returncode != 0:
        raise AssertionError(f"node {' '.join(argv[3:5])} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def call(redis_url: str, queue: str, method: str, *args: Any) -> Any:
    """`await new Queue(queue)[method](...args)` in Node; the result as JSON."""
    return node(redis_url, "call", queue, method, list(args))


#: Child processes still running; the conftest kills them after each test.
LIVE: list[Process] = []


class Process:
    """A child process printing JSON lines, read on a thread into `lines`."""

    def __init__(self, argv: list[str], label: str) -> None:
        LIVE.append(self)
        self.label = label
        self.lines: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr: list[str] = []
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    def seen(self, key: str, value: Any = None) -> list[dict[str, Any]]:
        """Lines having `key` (equal to value when given)."""
        return [
            ln
            for ln in list(self.lines)
            if key in ln and (value is None or ln[key] == value)
        ]

    def wait_for(
        self, key: str, value: Any = None, timeout: float = 30
    ) -> dict[str, Any]:
        """The first line with key (= value), waiting for it."""

        def found() -> dict[str, Any] | None:
            if self.proc.poll() is not None and not self.seen(key, value):
                raise AssertionError(
                    f"{self.label} exited ({self.proc.returncode}): "
                    f"{''.join(self._stderr)[-2000:]}"
                )
            hits = self.seen(key, value)
            return hits[0] if hits else None

        return wait_until(found, timeout, what=f"{self.label} to print {key}={value}")

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM and wait for a clean exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.label} did not stop within {timeout}s"
            ) from None

    def kill(self) -> None:
        """SIGKILL: no clean-up at all."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def node_worker(redis_url: str, queue: str, **opts: Any) -> Process:
    """A Node BullMQ Worker process (bull.mjs worker), ready to take jobs."""
    proc = Process(
        ["node", str(BULL), redis_arg(redis_url), "worker", queue, json.dumps(opts)],
        f"node worker {opts.get('name', '')}",
    )
    proc.wait_for("ready")
    return proc


def node_events(redis_url: str, queue: str) -> Process:
    """A Node QueueEvents process printing every event from the stream start."""
    proc = Process(
        ["node", str(BULL), redis_arg(redis_url), "events", queue], "node events"
    )
    proc.wait_for("ready")
    return proc


def py_worker(redis_url: str, queue: str, **opts: Any) -> Process:
    """A Python worker process (tests/interop/pyworker.py)."""
    proc = Process(
        [
            sys.executable,
            "-m",
            "tests.interop.pyworker",
            redis_url,
            queue,
            json.dumps(opts),
        ],
        f"python worker {opts.get('worker_name', '')}",
    )
    proc.wait_for("ready")
    return proc


class Recorder:
    """What an in-process Python worker ran: (id, attempts_made, priority)."""

    def __init__(self) -> None:
        self.starts: list[tuple[str, int, int]] = []


@contextmanager
def python_worker(
    redis_url: str, queue: str, name: str = "py", **options: Any
) -> Iterator[Recorder]:
    """An AsyncWorker with the shared behaviour on a thread, closed on exit."""
    record = Recorder()

    async def processor(job: Job) -> Any:
        record.starts.append((job.id, job.attempts_made, job.priority))
        return await behave(job, name)

    worker = AsyncWorker(
        queue, processor, connection=redis_url, worker_name=name, **options
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=lambda: loop.run_until_complete(worker.run(install_signals=False)),
        daemon=True,
    )
    thread.start()
    try:
        yield record
    finally:
        loop.call_soon_threadsafe(worker.close)
        thread.join(30)
        assert not thread.is_alive(), "python worker did not stop within 30s"
        loop.close()
