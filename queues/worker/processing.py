"""Running one claimed job: building it, calling the processor (async, or in
a thread), and queueing its outcome to be saved with the next finish."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .. import codec
from ..connection import max_connections_of, sibling_sync_client
from ..exceptions import UnrecoverableError
from ..job import Job
from ..options import keep_jobs
from ..queue import Queue
from .support import Processor, _text, log

if TYPE_CHECKING:
    from ..keys import QueueKeys
    from ..queue import AsyncQueue
    from ..telemetry import WorkerTelemetry
    from .reporting import WorkerReports
    from .threads import ThreadRunner


class Processing:
    """Mixin of AsyncWorker: running a claimed job to its outcome."""

    name: str
    keys: QueueKeys
    queue: AsyncQueue
    processor: Processor
    is_async: bool
    processed: int
    remove_on_complete: Any
    telemetry: WorkerTelemetry
    _reports: WorkerReports
    _sync_queue: Queue | None
    _threads: ThreadRunner | None
    _running: dict[str, Job]
    _finished: list[dict[str, Any]]
    _tasks: set[asyncio.Task[Any]]
    _wake: asyncio.Event | None

    async def _on_failure(self, job: Job, exc: BaseException) -> dict[str, Any] | None:
        raise NotImplementedError

    def _make_job(self, job_id: str, h: dict[str, str]) -> Job:
        job: Job[Any]
        if self.is_async:
            job = Job.from_hash(self.queue, job_id, h)
        else:
            if self._sync_queue is None:
                client = sibling_sync_client(
                    self.queue.client,
                    max_connections=max_connections_of(self.queue.client),
                )
                self._sync_queue = Queue(self.name, client, self.keys.prefix)
            job = Job.from_hash(self._sync_queue, job_id, h)
        job.on_progress = self._reports.progress
        return job

    def _start(self, job: Job) -> None:
        self._running[job.id] = job
        self._reports.active(job)
        task = asyncio.create_task(
            self._process(job), context=self.telemetry.job_context(job)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _process(self, job: Job) -> None:
        entry: dict[str, Any] | None = None
        try:
            try:
                if job.repeat_job_key:
                    await self._schedule_next_iteration(job)
                if job.deferred_failure:
                    raise UnrecoverableError(job.deferred_failure)
                if job.malformed:
                    raise UnrecoverableError(job.malformed)
                if self.is_async:
                    result = await self.processor(job)
                else:
                    assert self._threads is not None
                    result = await self._threads.submit(self.processor, job)
                try:
                    value = codec.dumps(result)
                except TypeError as exc:
                    raise UnrecoverableError(
                        f"return value is not JSON serializable: {exc}"
                    ) from exc
                self.processed += 1
                self._reports.completed(job, result)
                entry = {
                    "id": job.id,
                    "token": job.token,
                    "target": "completed",
                    "value": value,
                    "attempts": job.opts.get("attempts", 0),
                    "keep": keep_jobs(
                        job.opts.get("removeOnComplete"), self.remove_on_complete
                    ),
                }
                self._reports.attach_attempt(entry, job, "completed")
            except Exception as exc:  # noqa: BLE001 - any processor error fails the job
                try:
                    entry = await self._on_failure(job, exc)
                except Exception as bug:  # noqa: BLE001 - never strand a job in active
                    log.exception(
                        "worker %s: handling the failure of job %s failed",
                        self.name,
                        job.id,
                    )
                    entry = {
                        "id": job.id,
                        "token": job.token,
                        "target": "failed",
                        "value": _text(f"{exc} (and then: {bug})"),
                        "attempts": 0,
                        "keep": {"count": -1},
                    }
                    self._reports.attach_attempt(entry, job, "failed", entry["value"])
                if entry is not None:
                    self._reports.failed(job, exc)
        finally:
            self._running.pop(job.id, None)
            if entry is not None:
                self._finished.append(entry)
            if self._wake is not None:
                self._wake.set()

    async def _schedule_next_iteration(self, job: Job) -> None:
        """A job scheduler's iteration was taken: add the next one, as Node's
        worker does, so a schedule keeps running with any mix of workers."""
        try:
            await self.queue.schedule_next_iteration(job)
        except Exception as exc:  # noqa: BLE001 - the current iteration still runs
            log.warning(
                "worker %s: next iteration of job scheduler %s not added (%s)",
                self.name,
                job.repeat_job_key,
                exc,
            )
