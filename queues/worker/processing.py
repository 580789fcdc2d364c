"""Running claimed jobs: building each one, calling the processor (awaited,
or on a thread for a plain `def`), and handing its outcome to the finisher
to be saved with the next batch."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..connection import max_connections_of, sibling_sync_client
from ..exceptions import MoveToWait, UnrecoverableError
from ..job import Job
from ..queue import Queue
from .support import Processor, log
from .threads import ThreadRunner

if TYPE_CHECKING:
    from ..queue import AsyncQueue
    from .finishing import Entry, Finisher
    from .reporting import WorkerReports


class JobRunner:
    """Runs the jobs one worker claimed, each in a task of its own; chained
    (see `chain`), a job's task goes on with the next job its end claimed."""

    def __init__(
        self,
        *,
        queue: AsyncQueue,
        processor: Processor,
        threads: int,
        finisher: Finisher,
        wake: Callable[[], None],
        reports: WorkerReports,
    ) -> None:
        self._queue = queue
        self._processor = processor
        # An async def, or an object whose __call__ is one.
        self.is_async = inspect.iscoroutinefunction(
            processor
        ) or inspect.iscoroutinefunction(type(processor).__call__)
        #: How many threads run a plain `def` processor.
        self._thread_count = threads
        self._finisher = finisher
        #: Called when a job ended: the worker saves it and may claim again.
        self._wake = wake
        self._reports = reports
        #: Claimed jobs that have not ended, by id.
        self.running: dict[str, Job] = {}
        #: Their tasks.
        self.tasks: set[asyncio.Task[Any]] = set()
        self._threads: ThreadRunner | None = None
        #: The queue of the jobs a plain `def` processor gets (made on first use).
        self._sync_queue: Queue | None = None
        #: Set by a worker of concurrency 1: a job's task, once its job ended,
        #: awaits this to save the end (the worker's finish call, claiming
        #: the next job in it, when the worker lets it: else its loop saves)
        #: and runs the job that call claimed, in the same task. As in Node's
        #: worker, a job then costs one pass of the event loop, not three (a
        #: task's start and the loop's wake each took one): 8 % less worker
        #: CPU a job at concurrency 1 (docs/scaling.md).
        self.chain: Callable[[], Awaitable[object]] | None = None
        #: While a task's chain call runs: the job it claimed, for that task.
        self._chaining = False
        self._handed: Job | None = None

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the threads of a plain `def` processor on `loop`."""
        if not self.is_async:
            self._threads = ThreadRunner(
                loop, self._thread_count, f"worker-{self._queue.name}"
            )

    def close(self) -> None:
        """Stop the threads and close the sync queue's client."""
        if self._threads is not None:
            self._threads.shutdown()
        if self._sync_queue is not None:
            self._sync_queue.close()

    def locks(self) -> dict[str, str | None]:
        """The lock of each running job."""
        return {job.id: job.token for job in self.running.values()}

    def start(self, job_id: str, fields: dict[str, str], token: str) -> None:
        """Run the claimed job whose hash holds `fields`."""
        job = self._make_job(job_id, fields)
        job.token = token
        self.running[job.id] = job
        self._reports.active(job)
        context = self._reports.telemetry.job_context(job)
        if self._chaining and self._handed is None and context is None:
            self._handed = job  # (a traced job gets a task: its own context)
            return
        self._spawn(job, context)

    def _spawn(self, job: Job, context: contextvars.Context | None) -> None:
        task = asyncio.create_task(self._run(job), context=context)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, job: Job | None) -> None:
        """A job's task: the job, then those its chain claimed; the worker's
        loop is woken when it ends."""
        try:
            while job is not None:
                await self._process(job)
                job = await self._next_in_chain()
        finally:
            self._wake()

    async def _next_in_chain(self) -> Job | None:
        """Save the ended job from this task (chained); the job the call
        claimed, handed to this task by start(), whatever the call said."""
        if self.chain is None:
            return None
        self._chaining = True
        try:
            await self.chain()
        except BaseException:
            self._chaining = False
            handed, self._handed = self._handed, None
            if handed is not None:  # (claimed: it runs in a task of its own)
                self._spawn(handed, None)
            raise
        self._chaining = False
        job, self._handed = self._handed, None
        return job

    def _make_job(self, job_id: str, h: dict[str, str]) -> Job:
        job: Job[Any]
        if self.is_async:
            job = Job.from_hash(self._queue, job_id, h)
        else:
            if self._sync_queue is None:
                client = sibling_sync_client(
                    self._queue.client,
                    max_connections=max_connections_of(self._queue.client),
                )
                self._sync_queue = Queue(
                    self._queue.name, client, self._queue.keys.prefix
                )
            job = Job.from_hash(self._sync_queue, job_id, h)
        job.on_progress = self._reports.progress
        return job

    async def _process(self, job: Job) -> None:
        entry: Entry | None = None
        try:
            try:
                if job.repeat_job_key:
                    await self._schedule_next_iteration(job)
                if job.deferred_failure:
                    raise UnrecoverableError(job.deferred_failure)
                if job.malformed:
                    raise UnrecoverableError(job.malformed)
                if self.is_async:
                    result = await self._processor(job)
                else:
                    assert self._threads is not None
                    result = await self._threads.submit(self._processor, job)
                entry = self._finisher.completion(job, result)
            except MoveToWait as why:
                await self._finisher.give_back(job, why)
            except Exception as exc:  # noqa: BLE001 - any processor error fails the job
                entry = await self._finisher.failure(job, exc)
        finally:
            self.running.pop(job.id, None)
            if entry is not None:
                self._finisher.pending.append(entry)

    async def _schedule_next_iteration(self, job: Job) -> None:
        """A job scheduler's iteration was taken: add the next one, as Node's
        worker does, so a schedule keeps running with any mix of workers."""
        try:
            await self._queue.schedule_next_iteration(job)
        except Exception as exc:  # noqa: BLE001 - the current iteration still runs
            log.warning(
                "worker %s: next iteration of job scheduler %s not added (%s)",
                self._queue.name,
                job.repeat_job_key,
                exc,
            )
