"""Worker-local event hooks (BullMQ's worker.on): active, progress,
completed, failed, stalled, drained, error, closing and closed reach
listeners in the worker process, sync and async; a raising listener is
logged and changes nothing."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from queues import AsyncQueue, AsyncWorker, Job, JobState, Queue, Worker
from tests.helpers import wait_until
from tests.queues.worker.helpers import WorkerThread


@contextmanager
def running(worker: Worker) -> Iterator[WorkerThread]:
    """`worker` running in a thread for the block, closed after it."""
    handle = WorkerThread(worker)
    handle.thread.start()
    try:
        yield handle
    finally:
        handle.stop()


class Recorder:
    """Listeners recording (event, job id or None, detail) in order; the
    completed and failed ones also record the job's state in Redis then."""

    def __init__(self, q: Queue) -> None:
        self.q = q
        self.seen: list[tuple[str, Any, Any]] = []
        self.lock = threading.Lock()

    def add(self, event: str, job_id: Any, detail: Any = None) -> None:
        with self.lock:
            self.seen.append((event, job_id, detail))

    def events(self, event: str) -> list[tuple[str, Any, Any]]:
        with self.lock:
            return [e for e in self.seen if e[0] == event]

    def attach(self, worker: Any) -> None:
        worker.on("active", lambda job: self.add("active", job.id))
        worker.on("progress", lambda job, p: self.add("progress", job.id, p))

        @worker.on("completed")
        def completed(job: Job, result: Any) -> None:
            state = self.q.get_job_state(job.id)
            self.add("completed", job.id, (result, state, job.attempts_made))

        @worker.on("failed")
        def failed(job: Job, error: BaseException) -> None:
            state = self.q.get_job_state(job.id)
            self.add("failed", job.id, (str(error), state, job.attempts_made))

        worker.on("drained", lambda: self.add("drained", None))
        worker.on("closed", lambda: self.add("closed", None))


def flaky(job: Job) -> Any:
    """Reports progress; fails as its data says."""
    job.update_progress(50)
    if job.data.get("fail_first") and job.attempts_made == 0:
        raise RuntimeError("first attempt fails")
    if job.data.get("fail"):
        raise ValueError("always fails")
    return {"n": job.data.get("n", 0) * 2}


def test_sync_worker_hooks(redis_url: str, q: Queue) -> None:
    """A plain Worker calls its listeners with BullMQ's arguments: active,
    progress (reported from the processor's thread), completed once Redis
    has the result, failed per attempt (the retry, then a final failure
    once saved), drained when the queue is empty, closed last."""
    rec = Recorder(q)
    ok = q.add("ok", {"n": 21})
    retried = q.add("retried", {"fail_first": True}, attempts=2)
    doomed = q.add("doomed", {"fail": True})
    worker = Worker(q.name, flaky, connection=redis_url, drain_delay=0.2)
    rec.attach(worker)
    with running(worker):
        wait_until(lambda: len(rec.events("completed")) == 2, what="completions")
        wait_until(lambda: len(rec.events("failed")) == 2, what="failures")
        wait_until(lambda: rec.events("drained"), what="drained")
    assert rec.seen[-1] == ("closed", None, None)
    assert len(rec.events("closed")) == 1
    actives = [e[1] for e in rec.events("active")]
    assert sorted(actives) == sorted([ok.id, retried.id, retried.id, doomed.id])
    assert ("progress", ok.id, 50) in rec.seen
    assert ("completed", ok.id, ({"n": 42}, JobState.COMPLETED, 1)) in rec.seen
    assert ("completed", retried.id, ({"n": 0}, JobState.COMPLETED, 2)) in rec.seen
    failed = {e[1]: e[2] for e in rec.events("failed")}
    assert failed[retried.id][:2] == ("first attempt fails", JobState.WAITING)
    assert failed[retried.id][2] == 1
    assert failed[doomed.id] == ("always fails", JobState.FAILED, 1)
    assert [e[0] for e in rec.seen if e[1] == ok.id] == [
        "active",
        "progress",
        "completed",
    ]


def test_async_worker_async_listeners(redis_url: str, qname: str) -> None:
    """An AsyncWorker with an async processor awaits async listeners (a slow
    one on closed still runs before run() returns); progress reaches
    listeners once written; off() removes one."""
    seen: list[tuple[str, Any]] = []

    async def process(job: Job) -> Any:
        await job.update_progress(10)
        return job.data["n"] + 1

    async def main() -> None:
        async with AsyncQueue(qname, redis_url) as aq:
            job = await aq.add("a", {"n": 1})
            worker = AsyncWorker(qname, process, connection=redis_url, drain_delay=0.2)

            async def on_completed(j: Job, result: Any) -> None:
                await asyncio.sleep(0.01)
                seen.append(("completed", (j.id, result, j.returnvalue)))
                worker.close()

            async def on_closed() -> None:
                await asyncio.sleep(0.2)
                seen.append(("closed", None))

            def unwanted(j: Job) -> None:
                seen.append(("active-removed", j.id))

            worker.on("completed", on_completed)
            worker.on("closed", on_closed)
            stored = redis.Redis.from_url(redis_url, decode_responses=True)
            key = aq.keys.job(job.id)
            worker.on(
                "progress",
                lambda j, p: seen.append(("progress", stored.hget(key, "progress"))),
            )
            worker.on("active", unwanted)
            worker.off("active", unwanted)
            await asyncio.wait_for(worker.run(install_signals=False), 15)
            stored.close()
            assert seen == [
                ("progress", "10"),
                ("completed", (job.id, 2, 2)),
                ("closed", None),
            ]

    asyncio.run(main())


def test_raising_listeners_are_logged_and_change_nothing(
    redis_url: str, q: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    """Listeners that raise (sync and async, on completed and failed) are
    logged; the jobs end as they would have and the worker keeps working."""

    def broken(*args: Any) -> None:
        raise RuntimeError("listener bug")

    async def broken_async(*args: Any) -> None:
        raise RuntimeError("async listener bug")

    worker = Worker(q.name, flaky, connection=redis_url, drain_delay=0.2)
    for event in ("active", "completed", "failed", "progress", "drained"):
        worker.on(event, broken)
        worker.on(event, broken_async)
    with caplog.at_level(logging.ERROR, logger="queues.worker"), running(worker):
        first = [q.add("ok", {"n": i}) for i in range(3)]
        bad = q.add("bad", {"fail": True})
        wait_until(lambda: q.get_counts("completed")["completed"] == 3)
        later = q.add("ok", {"n": 5})
        wait_until(lambda: q.get_job_state(later.id) is JobState.COMPLETED)
        wait_until(lambda: q.get_job_state(bad.id) is JobState.FAILED)
    assert all(q.get_job(j.id).returnvalue == {"n": 2 * i} for i, j in enumerate(first))
    assert q.get_job(bad.id).failed_reason == "always fails"
    messages = [r.getMessage() for r in caplog.records]
    for event in ("'completed'", "'failed'", "'active'", "'progress'"):
        assert any(event in m and "raised" in m for m in messages), event
    assert any(
        r.exc_info and "async listener bug" in str(r.exc_info[1])
        for r in caplog.records
    )


def test_stalled_hook(redis_url: str, q: Queue, r: redis.Redis) -> None:
    """The worker's stalled check reports each job it moved back to wait as
    `stalled` (its id), then the job runs again."""
    job = q.add("orphan", {"n": 1})
    # A worker that died after claiming it: in active, no lock, a candidate.
    r.lrem(q.keys.wait, 0, job.id)
    r.lpush(q.keys.active, job.id)
    r.sadd(q.keys.stalled, job.id)
    r.delete(q.keys.marker)
    rec = Recorder(q)
    worker = Worker(q.name, flaky, connection=redis_url, drain_delay=0.2)
    rec.attach(worker)
    worker.on("stalled", lambda job_id: rec.add("stalled", job_id))
    with running(worker):
        wait_until(lambda: rec.events("completed"), what="the orphan done")
    assert rec.events("stalled") == [("stalled", job.id, None)]
    assert rec.events("completed")[0][1] == job.id


def test_error_hook_when_redis_is_unreachable(qname: str) -> None:
    """A worker whose Redis does not answer reports `error` with the
    connection error and keeps retrying until closed."""
    errors: list[BaseException] = []

    async def main() -> None:
        worker = AsyncWorker(
            qname, lambda job: None, connection="redis://127.0.0.1:1/0"
        )

        def on_error(exc: BaseException) -> None:
            errors.append(exc)
            if len(errors) == 2:
                worker.close()

        worker.on("error", on_error)
        await asyncio.wait_for(worker.run(install_signals=False), 15)

    asyncio.run(main())
    assert len(errors) >= 2
    assert all(isinstance(e, (redis.ConnectionError, OSError)) for e in errors)


def test_closing_hook_once_when_close_is_called(redis_url: str, qname: str) -> None:
    """`closing` reaches listeners as close() is first called (BullMQ's
    'closing'), once however often it is called, before `closed`."""
    seen: list[str] = []

    async def main() -> None:
        worker = AsyncWorker(
            qname, lambda job: None, connection=redis_url, drain_delay=0.2
        )
        worker.on("closing", lambda: seen.append("closing"))
        worker.on("closed", lambda: seen.append("closed"))
        run = asyncio.create_task(worker.run(install_signals=False))
        await asyncio.sleep(0.3)
        assert seen == []
        worker.close()
        assert seen == ["closing"]
        worker.close(force=True)
        await asyncio.wait_for(run, 10)

    asyncio.run(main())
    assert seen == ["closing", "closed"]


def test_unknown_event_is_refused(redis_url: str, qname: str) -> None:
    """on() names BullMQ's worker events only, and needs a callable."""
    worker = Worker(qname, flaky, connection=redis_url)
    with pytest.raises(ValueError, match="unknown worker event"):
        worker.on("complete", print)
    with pytest.raises(TypeError):
        worker.on("completed", "not callable")
