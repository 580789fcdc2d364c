"""Helpers shared by every test package."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

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
