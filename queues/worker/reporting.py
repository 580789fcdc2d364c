"""What a worker reports as it runs: its event hooks and its telemetry.

The worker calls one method here per happening; this module decides what
each listener and instrument gets, and when: `completed` and a final
`failed` reach listeners only once the batch that saves them has run
(BullMQ emits them after its moveToFinished), retries once they are saved.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..attempts import AttemptHistory, AttemptRecorder
from ..job import Job
from ..queue import AsyncQueue
from ..telemetry import WorkerTelemetry
from .hooks import WorkerHooks
from .support import log

#: Workers keep an attempt history unless given attempt_history=None.
DEFAULT_HISTORY = AttemptHistory()


def attempt_recorder(
    history: AttemptHistory | None, queue: AsyncQueue, worker: str
) -> AttemptRecorder | None:
    """The recorder of a worker's attempts on `queue`, or None without history."""
    if history is None:
        return None
    if not isinstance(history, AttemptHistory):
        raise TypeError("attempt_history must be an AttemptHistory(...) or None")
    return AttemptRecorder(
        history, queue.client, queue.keys.prefix, queue.name, worker, log
    )


class WorkerReports:
    """The hooks and telemetry of one worker, fed by its loop."""

    def __init__(
        self,
        hooks: WorkerHooks,
        telemetry: WorkerTelemetry,
        attempts: AttemptRecorder | None = None,
    ) -> None:
        self.hooks = hooks
        self.telemetry = telemetry
        #: Makes each attempt's record, which its finish carries (or None).
        self.attempts = attempts
        #: Finished jobs whose listeners wait for the save: (id, token) ->
        #: (event, job, result or error).
        self._unsaved: dict[tuple[str, str | None], tuple[str, Job, Any]] = {}
        self._drained = False

    def started(self) -> None:
        """The worker's run() began."""
        self.telemetry.worker_started()

    async def written(self, wait_s: float) -> None:
        """Let pending attempt records be written (before clients close)."""
        if self.attempts is not None:
            await self.attempts.wait(wait_s)

    async def stopped(self, wait_s: float) -> None:
        """run() ends: `closed` to listeners, whose async calls get `wait_s`."""
        self.telemetry.worker_stopped()
        self.hooks.emit("closed")
        await self.hooks.wait(wait_s)

    # --- jobs -------------------------------------------------------------
    def active(self, job: Job) -> None:
        """The worker took `job` and starts it."""
        self._drained = False
        self.telemetry.job_started(job)
        self.hooks.emit("active", job)

    def progress(self, job: Job, progress: Any) -> None:
        """`job` reported progress (from any thread)."""
        self.hooks.emit("progress", job, progress)

    def attach_attempt(
        self, entry: dict[str, Any], job: Job, intended: str, error: Any = None
    ) -> dict[str, Any]:
        """`entry` (a finish) with its attempt record when history is kept."""
        if self.attempts is not None:
            entry["attempt"] = self.attempts.record(job, intended, error)
        return entry

    def completed(self, job: Job, result: Any) -> None:
        """`job` returned `result`; its completion is queued for saving."""
        self.telemetry.job_completed(job)
        if self.hooks.listened("completed"):
            job.returnvalue = result
            self._unsaved[(job.id, job.token)] = ("completed", job, result)

    def failed(self, job: Job, error: BaseException) -> None:
        """`job` failed for good; its failure is queued for saving."""
        self.telemetry.job_failed(job, error)
        if self.hooks.listened("failed"):
            job.failed_reason = str(error) or type(error).__name__
            self._unsaved[(job.id, job.token)] = ("failed", job, error)

    def retried(
        self, job: Job, error: BaseException, delay_ms: int, code: int | None
    ) -> None:
        """An attempt of `job` failed and its retry is saved (code 0), refused
        (a negative code) or left unsaved as the worker closed (None)."""
        self.telemetry.job_retried(job, error, delay_ms)
        if self.attempts is not None:
            if code is None:
                self.attempts.forget(job)
            else:
                self.attempts.retried(job, error, delay_ms, code)
        if self.hooks.listened("failed"):
            job.attempts_made += 1
            job.failed_reason = str(error) or type(error).__name__
            self.hooks.emit("failed", job, error)

    def returned(self, job: Job, reason: BaseException, code: int | None) -> None:
        """`job` was given back to wait (code >= 0), refused (a negative
        code) or left to the stalled check as the worker closed (None): its
        attempt's record says `returned` (or `lost`); no event to listeners
        (BullMQ emits none either)."""
        self.telemetry.job_returned(job, reason)
        if self.attempts is not None:
            if code is None:
                self.attempts.forget(job)
            else:
                self.attempts.returned(job, reason, min(code, 0))

    def saved(self, entries: Sequence[dict[str, Any]], codes: Sequence[int]) -> None:
        """A batch of finished jobs was written; code 0 = saved as reported."""
        if self.attempts is not None:
            self.attempts.saved(entries, codes)
        if not self._unsaved:
            return
        now = int(time.time() * 1000)
        for entry, code in zip(entries, codes):
            unsaved = self._unsaved.pop((entry["id"], entry["token"]), None)
            if unsaved is None or code != 0:
                continue
            event, job, value = unsaved
            job.attempts_made += 1
            job.finished_on = now
            self.hooks.emit(event, job, value)

    # --- the queue --------------------------------------------------------
    def nothing_to_claim(self) -> None:
        """A claim found the queue empty: `drained`, once until a job comes."""
        if not self._drained:
            self._drained = True
            self.hooks.emit("drained")

    def rate_limited(self, delay_ms: int) -> None:
        """A claim found the rate limit reached."""
        self.telemetry.rate_limited(delay_ms)

    def stalled(self, recovered: list[str], failed: int, started: float) -> None:
        """This worker's stalled check moved `recovered` back to wait."""
        self.telemetry.stalled_check(recovered, failed, started)
        for job_id in recovered:
            self.hooks.emit("stalled", job_id)

    def error(self, error: BaseException) -> None:
        """A worker error not tied to a job."""
        self.hooks.emit("error", error)
