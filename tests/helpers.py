"""Helpers shared by every test package."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

from gpu_workers.keys import BullpenKeys
from gpu_workers.quota import day_stamp
from queues import Queue

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "the condition",
) -> T:
    """Poll until `predicate()` is truthy and return it; AssertionError once
    `timeout` seconds have passed (every wait in the suite is bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def stop_process(proc: subprocess.Popen[Any], timeout_s: float) -> None:
    """SIGTERM `proc` and wait up to `timeout_s` for it; SIGKILL after."""
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def round_trips(conn: Any, monkeypatch: Any) -> list[str]:
    """Each connection taken from the redis-py client `conn`'s pool from now
    on: one per command or pipeline sent, so one per round trip."""
    taken: list[str] = []
    pool = conn.connection_pool
    real = pool.get_connection

    def counting(*args: Any, **kwargs: Any) -> Any:
        taken.append(str(args[:1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(pool, "get_connection", counting)
    return taken


def use_gpu_seconds(r: Any, q: Queue, group: str, seconds: float) -> None:
    """Count `seconds` of GPU for `group` today, where a GPU worker's attempts
    add them (the day's usage hash of gpu_workers/quota.py)."""
    usage = BullpenKeys().group_usage(q.keys.qualified_name, day_stamp(time.time()))
    r.hincrbyfloat(usage, group, seconds)
