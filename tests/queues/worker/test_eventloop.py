"""The loop Bullpen's own runners use (queues/eventloop.py): uvloop where it
is installed (as `make test` installs it), asyncio's where it is not; a
`Worker` works jobs on it, and closes from another thread."""

from __future__ import annotations

import asyncio
import sys

import pytest

from queues import Job, Queue
from queues.eventloop import loop_factory, run
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_runs_on_uvloop_where_installed() -> None:
    assert run(_loop_module()).startswith("uvloop")


def test_runs_on_asyncios_loop_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvloop not importable (None in sys.modules makes `import` fail)."""
    monkeypatch.setitem(sys.modules, "uvloop", None)
    assert loop_factory() is None
    assert run(_loop_module()).startswith("asyncio")


def test_run_returns_the_result_and_raises_the_error() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def fail() -> None:
        raise LookupError("from the coroutine")

    assert run(answer()) == 42
    with pytest.raises(LookupError, match="from the coroutine"):
        run(fail())


def test_a_worker_works_its_jobs_on_uvloop(redis_url: str, q: Queue) -> None:
    """Async and progress writes through the worker's own clients, then a
    close() from this thread ends run()."""
    seen: list[str] = []

    async def processor(job: Job) -> int:
        seen.append(await _loop_module())
        await job.update_progress(50)
        return int(job.data["n"]) * 2

    jobs = [q.add("double", {"n": n}) for n in range(5)]
    with worker_thread(q.name, processor, redis_url, concurrency=2) as handle:
        wait_until(lambda: q.get_counts("completed")["completed"] == 5, 10)
        assert handle.alive
    assert not handle.alive
    assert [q.get_job(j.id).returnvalue for j in jobs] == [0, 2, 4, 6, 8]
    assert len(seen) == 5 and all(m.startswith("uvloop") for m in seen)
