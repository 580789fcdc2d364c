"""Failed attempts: retry now, retry after backoff, or fail for good."""

from __future__ import annotations

import asyncio
import time
import traceback
from typing import TYPE_CHECKING, Any

from .. import codec, defaults, ops
from ..drive import run_async
from ..exceptions import UnrecoverableError
from ..job import Job
from ..options import backoff_delay, keep_jobs
from ..outages import recoverable
from .support import _text, log

if TYPE_CHECKING:
    from ..keys import QueueKeys
    from ..options import BackoffStrategy
    from ..outages import Outage
    from ..queue import AsyncQueue
    from ..scripts import Scripts
    from .reporting import WorkerReports


#: Attempts to save a retry once the worker is closing; until then a retry
#: is saved whenever Redis answers again (the job's lock is kept meanwhile).
CLOSING_TRIES = 3


class FailureHandling:
    """Mixin of AsyncWorker: what happens when a processor raises."""

    name: str
    keys: QueueKeys
    queue: AsyncQueue
    failed: int
    backoff_strategy: BackoffStrategy | None
    remove_on_fail: Any
    _reports: WorkerReports
    _once: Scripts
    _closing: bool
    _outage: Outage

    async def _on_failure(self, job: Job, exc: BaseException) -> dict[str, Any] | None:
        """Retry the job (now or after backoff) or return its final failure entry."""
        self.failed += 1
        reason = _text(str(exc) or type(exc).__name__)
        limit = job.opts.get("stackTraceLimit", defaults.STACKTRACE_LIMIT)
        trace = job.stacktrace + ["".join(traceback.format_exception(exc))]
        trace = trace[-limit:] if limit else []
        trace = [_text(t) if isinstance(t, str) else t for t in trace]
        fields = ["failedReason", reason, "stacktrace", codec.dumps(trace)]
        if job.malformed:
            fields += job.repair_fields()
        attempts_made = job.attempts_made + 1
        delay = -1  # not retried
        if isinstance(exc, UnrecoverableError):
            outcome = "unrecoverable, not retried"
        elif attempts_made >= job.attempts:
            outcome = "no attempts left"
        else:
            try:
                delay = backoff_delay(
                    job.opts.get("backoff"),
                    attempts_made,
                    exc,
                    job,
                    self.backoff_strategy,
                )
            except Exception as backoff_exc:  # noqa: BLE001 - a broken strategy fails the job
                reason = _text(f"{reason} (backoff failed: {backoff_exc})")
                fields[1] = reason
                outcome = "its backoff failed, not retried"
            else:
                if delay == -1:
                    outcome = "its backoff strategy said not to retry"
                elif delay:
                    outcome = f"retrying in {delay / 1000:g} s"
                else:
                    outcome = "retrying now"
        log.warning(
            "job %s (%s) failed on attempt %d of %d (%s): %s: %s",
            job.id,
            job.name,
            attempts_made,
            job.attempts,
            outcome,
            type(exc).__name__,
            " ".join(str(exc).split()) or "-",
        )
        if delay != -1:
            code = await self._retry(job, delay, fields)
            self._reports.retried(job, exc, delay, code)
            return None
        entry = {
            "id": job.id,
            "token": job.token,
            "target": "failed",
            "value": reason,
            "fields": fields,
            "attempts": job.opts.get("attempts", 0),
            "keep": keep_jobs(job.opts.get("removeOnFail"), self.remove_on_fail),
        }
        return self._reports.attach_attempt(entry, job, "failed", reason)

    async def _retry(self, job: Job, delay: int, fields: list[str]) -> int | None:
        """Save the retry: the script's code, or None when left unsaved."""
        now = int(time.time() * 1000)
        tries = 0
        while True:
            try:
                if delay > 0:
                    retry = ops.retry_later(
                        self.keys, now, job.id, job.token, delay, fields
                    )
                else:
                    retry = ops.retry_now(
                        self.keys, now, job.id, job.token, fields, job.lifo
                    )
                once = self._once
                code = await run_async(
                    retry, once.client, once, refusals_as_unavailable=False
                )
                self._outage.succeeded()
                if code != 0:
                    log.warning(
                        "worker %s: retry of job %s not saved (code %s)",
                        self.name,
                        job.id,
                        code,
                    )
                return int(code)
            except Exception as exc:
                if not recoverable(exc):
                    raise
                tries += 1
                if self._closing and tries >= CLOSING_TRIES:
                    # Left in active (its lock lapses once the worker is
                    # gone): the stalled check returns it to wait.
                    return None
                await asyncio.sleep(self._outage.failed(exc))
