"""Fixtures of the worker tests (the session redis-server: tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.queues.worker.helpers import WorkerProcess, start_worker_process


@pytest.fixture
def spawn(
    redis_url: str, qname: str, tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker processes on the test queue; any still running at teardown
    are SIGKILLed, and their logs are printed when the test failed."""
    started: list[WorkerProcess] = []

    def start(**kwargs: Any) -> WorkerProcess:
        worker = start_worker_process(redis_url, qname, tmp_path, **kwargs)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()
    for worker in started:
        print(f"--- worker process {worker.pid} (exit {worker.proc.returncode}) log:")
        print(worker.log())
