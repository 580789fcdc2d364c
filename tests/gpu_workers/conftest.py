"""Fixtures of the GPU worker tests (the session redis-server comes from
tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_workers.fleet import Fleet
from tests.gpu_workers.helpers import (
    SupervisorProcess,
    WorkerThread,
    supervisor_config,
)


@pytest.fixture
def fleet(redis_url: str) -> Iterator[Fleet]:
    """The read/write API over the flushed session server."""
    f = Fleet(redis_url)
    yield f
    f.close()


@pytest.fixture
def supervise(
    redis_url: str, qname: str, tmp_path: Path
) -> Iterator[Callable[..., SupervisorProcess]]:
    """Start supervisor processes serving the test queue; whatever is left at
    teardown is SIGKILLed with its workers, and logs print on failure."""
    started: list[SupervisorProcess] = []

    def start(
        host: str = "h1",
        gpus: str = "sim:1x24GiB",
        queue: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> SupervisorProcess:
        queues = [{"queue": qname, **(queue or {})}]
        config = supervisor_config(redis_url, queues, host, gpus, **overrides)
        config.setdefault("log_dir", str(tmp_path / f"logs-{host}"))
        proc = SupervisorProcess(config, tmp_path / f"supervisor-{host}.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.close()
    for proc in started:
        print(f"--- supervisor {proc.config['host']} log:\n{proc.log()}")
        log_dir = Path(proc.config["log_dir"])
        for path in sorted(log_dir.glob("*.log")) if log_dir.exists() else []:
            print(f"--- {path.name}:\n{path.read_text(errors='replace')[-4000:]}")


@pytest.fixture
def workers() -> Iterator[list[WorkerThread]]:
    """GpuWorkers in threads, drained at teardown."""
    started: list[WorkerThread] = []
    yield started
    for w in started:
        if w.alive:
            w.stop()
