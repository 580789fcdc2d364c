"""Finishing attempts: a completion, or a failure that is retried (now or
after backoff) or final, and saving finished attempts in batches, each in
the call that also claims the next jobs."""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import codec, defaults, ops
from ..drive import run_async
from ..exceptions import MoveToWait, RateLimitError, UnrecoverableError
from ..job import Job
from ..options import backoff_delay, keep_jobs
from ..outages import recoverable
from .support import _text, log

if TYPE_CHECKING:
    from ..hotpath import AsyncCalls
    from ..keys import QueueKeys
    from ..options import BackoffStrategy
    from ..outages import Outage
    from ..scripts import Scripts
    from .reporting import WorkerReports


#: Attempts to save a retry once the worker is closing; until then a retry
#: is saved whenever Redis answers again (the job's lock is kept meanwhile).
CLOSING_TRIES = 3

#: A finished attempt as move_to_finished takes it (id, token, target...).
Entry = dict[str, Any]


class Finisher:
    """What happens to each attempt of a worker once its processor returned
    or raised, and the saving of those outcomes (its loop only)."""

    def __init__(
        self,
        *,
        name: str,
        keys: QueueKeys,
        once: Scripts,
        calls: AsyncCalls | None,
        backoff_strategy: BackoffStrategy | None,
        remove_on_complete: Any,
        remove_on_fail: Any,
        closing: Callable[[], bool],
        outage: Outage,
        reports: WorkerReports,
        rate_limited: Callable[[int], None],
    ) -> None:
        self.name = name
        self._keys = keys
        self._finish_keys = keys.move_to_finished_keys()
        self._once = once
        self._calls = calls
        self._backoff_strategy = backoff_strategy
        self._remove_on_complete = remove_on_complete
        self._remove_on_fail = remove_on_fail
        #: Whether the worker is closing (retries then give up sooner).
        self._closing = closing
        self._outage = outage
        self._reports = reports
        #: Told the ms a processor's RateLimitError left the queue limited.
        self._rate_limited = rate_limited
        #: Where finishes push their attempt records (ops.finish).
        self._history = None if reports.attempts is None else reports.attempts.args()
        #: Attempts that completed, and that failed (retried or not).
        self.processed = 0
        self.failed = 0
        #: Finished attempts waiting to be saved.
        self.pending: list[Entry] = []
        #: Those being saved now, by call in flight.
        self._saving: list[list[Entry]] = []

    def locks(self) -> dict[str, str | None]:
        """The lock of each finished job not saved yet: kept until saved."""
        saving = [e for entries in self._saving for e in entries]
        return {e["id"]: e["token"] for e in (*saving, *self.pending)}

    # --- one attempt ----------------------------------------------------------
    def completion(self, job: Job, result: Any) -> Entry:
        """`job` returned `result`: its completion (UnrecoverableError when
        the result is not JSON serializable)."""
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
            "gid": job.raw.get("gid", ""),
            "target": "completed",
            "value": value,
            "attempts": job.opts.get("attempts", 0),
            "keep": keep_jobs(
                job.opts.get("removeOnComplete"), self._remove_on_complete
            ),
        }
        return self._reports.attach_attempt(entry, job, "completed")

    async def failure(self, job: Job, exc: Exception) -> Entry | None:
        """`job` raised `exc`: its final failure, or None once its retry is
        saved (or left to the stalled check)."""
        try:
            entry = await self._failed_attempt(job, exc)
        except Exception as bug:  # noqa: BLE001 - never strand a job in active
            log.exception(
                "worker %s: handling the failure of job %s failed", self.name, job.id
            )
            entry = {
                "id": job.id,
                "token": job.token,
                "gid": job.raw.get("gid", ""),
                "target": "failed",
                "value": _text(f"{exc} (and then: {bug})"),
                "attempts": 0,
                "keep": {"count": -1},
            }
            self._reports.attach_attempt(entry, job, "failed", entry["value"])
        if entry is not None:
            self._reports.failed(job, exc)
        return entry

    async def _failed_attempt(self, job: Job, exc: BaseException) -> Entry | None:
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
                    self._backoff_strategy,
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
            "gid": job.raw.get("gid", ""),
            "target": "failed",
            "value": reason,
            "fields": fields,
            "attempts": job.opts.get("attempts", 0),
            "keep": keep_jobs(job.opts.get("removeOnFail"), self._remove_on_fail),
        }
        return self._reports.attach_attempt(entry, job, "failed", reason)

    async def _retry(self, job: Job, delay: int, fields: list[str]) -> int | None:
        """Save the retry: the script's code, or None when left unsaved."""
        now = int(time.time() * 1000)
        keys, job_id, token = self._keys, job.id, job.token
        if delay > 0:
            return await self._send(
                job,
                "retry",
                lambda: ops.retry_later(keys, now, job_id, token, delay, fields),
            )
        return await self._send(
            job,
            "retry",
            lambda: ops.retry_now(keys, now, job_id, token, fields, job.lifo),
        )

    async def give_back(self, job: Job, why: MoveToWait) -> None:
        """The processor gave `job` back (MoveToWait): to the front of the
        line, its attempts not counted."""
        log.info(
            "job %s (%s) given back to wait: %s",
            job.id,
            job.name,
            " ".join(str(why).split()) or "-",
        )
        code: int | None = None
        limit = why.delay_ms if isinstance(why, RateLimitError) else None
        try:
            code = await self._send(
                job,
                "give-back",
                lambda: ops.move_to_wait(self._keys, job.id, job.token, limit),
            )
        except Exception:  # noqa: BLE001 - its lock lapses: the stalled check has it
            log.exception("worker %s: giving back job %s failed", self.name, job.id)
        self._reports.returned(job, why, code)
        if isinstance(why, RateLimitError) and code is not None and code > 0:
            # The queue's rate limit holds `code` ms more: claim nothing
            # until then, as a claim answering it would (BullMQ: limitUntil).
            self._rate_limited(code)

    async def _send(
        self, job: Job, what: str, make: Callable[[], ops.Op[int]]
    ) -> int | None:
        """Send one transition of `job` out of active (`make()` builds its
        op), waiting out an outage: the script's code (< 0: refused, logged),
        or None when left unsaved as the worker closes."""
        tries = 0
        while True:
            try:
                once = self._once
                code = await run_async(
                    make(),
                    once.client,
                    once,
                    refusals_as_unavailable=False,
                    calls=self._calls,
                )
                self._outage.succeeded()
                if code < 0:
                    log.warning(
                        "worker %s: %s of job %s not saved (code %s)",
                        self.name,
                        what,
                        job.id,
                        code,
                    )
                return int(code)
            except Exception as exc:
                if not recoverable(exc):
                    raise
                tries += 1
                if self._closing() and tries >= CLOSING_TRIES:
                    # Left in active (its lock lapses once the worker is
                    # gone): the stalled check returns it to wait.
                    return None
                await asyncio.sleep(self._outage.failed(exc))

    # --- saving ---------------------------------------------------------------
    def begin(self) -> list[Entry]:
        """The pending attempts, taken for one call to save (their locks
        still renewed while it is in flight)."""
        entries, self.pending = self.pending, []
        self._saving.append(entries)
        return entries

    async def save(
        self, opts: str, entries: list[Entry] | None = None
    ) -> tuple[list[Any], Any, Any]:
        """Save `entries` (taken by begin(); default: the pending attempts)
        in one call, which claims the next jobs as `opts` says (its fetch);
        the claim's part of the answer. When the call fails they are pending
        again, their locks renewed meanwhile."""
        if entries is None:
            entries = self.begin()
        finish = ops.finish(
            self._finish_keys,
            self._keys.base,
            int(time.time() * 1000),
            opts,
            entries,
            self._history,
        )
        try:
            codes, flat, ttl, next_delay = await run_async(
                finish,
                self._once.client,
                self._once,
                refusals_as_unavailable=False,
                calls=self._calls,
            )
        except Exception:
            self.pending = entries + self.pending
            raise
        finally:
            self._saving = [s for s in self._saving if s is not entries]
        self._outage.succeeded()
        for entry, code in zip(entries, codes):
            if code != 0:
                log.warning(
                    "worker %s: job %s finished as %s but was not saved "
                    "(code %s: its lock was lost or it was moved)",
                    self.name,
                    entry["id"],
                    entry["target"],
                    code,
                )
        self._reports.saved(entries, codes)
        return flat, ttl, next_delay
