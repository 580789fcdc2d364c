"""Attempt history: one record per attempt of a job, kept in Redis.

A record is written in the same script call that saves the attempt's end,
from the code Redis answered with: a finish (completed, or failed for good)
by move_to_finished, a retry or a give-back (saved or refused) by
push_attempts right after it. A refused end (the job's lock was lost) is
recorded as `lost` with the code, never as what the worker hoped
(lua/includes/attempts.lua).
So the history costs a completing job no round trip of its own: the record
rides with its finish entry, an argument of its own (where the lists are and
how many to keep: three more per call, `args()`). Each write LPUSHes the
record, LTRIMs the list to the newest `keep` and EXPIREs it.

The list lives at `attempts_key()` (`bullpen:attempts:{prefix}:{queue}:{id}`),
outside the queue's keys, so BullMQ's scripts and Node workers never see it.
BullMQ removes jobs in Lua, which never deletes it: the TTL, renewed on
each write, removes an orphan history.

A record (JSON object): `attempt` (the job's attemptsStarted when claimed),
`started_ms` (processedOn), `ended_ms` (when the worker asked to save it),
`worker`, `host`, `pid`, `intended` (completed | failed | retried | returned:
what the worker asked Redis to save; returned: given back untouched by
MoveToWait), `outcome` (the intended one, or `lost`), `code` (lost only),
`error` (the attempt's failure, or why it was given back), `delay_ms`
(retried only), plus what the worker adds with `annotate()` (a GPU worker:
gpu, simulated, declared_bytes, peak_bytes...).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import codec, defaults
from .job import Job
from .keys import attempts_key
from .scripts import source

#: Outcomes of an attempt as recorded.
OUTCOMES = ("completed", "failed", "retried", "returned", "lost")
#: Awaited for each attempt Redis refused to save, with the job id and the
#: code (a GPU worker corrects its VRAM record).
OnLost = Callable[[str, int], Awaitable[None]]


@dataclass(frozen=True)
class AttemptHistory:
    """Where a worker keeps attempt records, and how many for how long."""

    namespace: str = defaults.ATTEMPTS_NAMESPACE
    keep: int = defaults.ATTEMPTS_KEEP
    ttl_s: int = defaults.ATTEMPTS_TTL_S

    def __post_init__(self) -> None:
        if self.keep < 1 or self.ttl_s < 1:
            raise ValueError("attempt history needs keep >= 1 and ttl_s >= 1")
        if not self.namespace or "{" in self.namespace or "}" in self.namespace:
            # A hash tag here would take the lists off their queue's slot.
            raise ValueError("an attempt history namespace is a name without {}")

    def key(self, prefix: str, queue: str, job_id: str) -> str:
        """The Redis list of one job's attempts, newest first."""
        return attempts_key(self.namespace, prefix, queue, job_id)


def _error_text(error: BaseException | str | None) -> str | None:
    if error is None:
        return None
    text = error if isinstance(error, str) else str(error) or type(error).__name__
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text[: defaults.ATTEMPT_ERROR_MAX_CHARS]


class AttemptRecorder:
    """Makes the attempt records of one worker's jobs (see the module doc)."""

    def __init__(
        self,
        history: AttemptHistory,
        client: Any,
        prefix: str,
        queue: str,
        worker: str,
        log: Any,
    ) -> None:
        self.history = history
        self.client = client
        self.prefix = prefix
        self.queue = queue
        self.worker = worker
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.log = log
        self.on_lost: OnLost | None = None
        self._push = client.register_script(source("push_attempts"))
        self._notes: dict[tuple[str, str | None], dict[str, Any]] = {}
        #: Retries' and give-backs' (intended, job id, record, code), and lost
        #: jobs to report, waiting for the writer, which sends all it finds
        #: at once (one call per intended outcome).
        self._pending: list[tuple[str, str, str, int]] = []
        self._lost: list[tuple[str, int]] = []
        self._writer: asyncio.Future[None] | None = None

    def annotate(self, job: Job, **fields: Any) -> None:
        """Add fields to the record of `job`'s current attempt (before it ends)."""
        self._notes.setdefault((job.id, job.token), {}).update(fields)

    def forget(self, job: Job) -> None:
        """Drop the notes held for `job` (its end will not be saved by us)."""
        self._notes.pop((job.id, job.token), None)

    def args(self) -> tuple[str, str, str]:
        """Where the records go (a job's list: this + its id), how many of
        them stay and for how long (s), as move_to_finished takes them."""
        h = self.history
        return (h.key(self.prefix, self.queue, ""), str(h.keep), str(h.ttl_s))

    def record(self, job: Job, intended: str, error: Any) -> str:
        """The record of `job`'s attempt as the scripts take it: JSON text
        ending with `outcome` = `intended`, which the script replaces when
        Redis refused the end (lua/includes/attempts.lua)."""
        record: dict[str, Any] = {
            "attempt": job.attempts_started or job.attempts_made + 1,
            "started_ms": job.processed_on,
            "ended_ms": int(time.time() * 1000),
            "worker": self.worker,
            "host": self.host,
            "pid": self.pid,
            "error": _error_text(error),
        }
        record.update(self._notes.pop((job.id, job.token), {}))
        record.pop("outcome", None)  # a note's: `outcome` must come last
        record["intended"] = record["outcome"] = intended
        return codec.dumps(record)

    def retried(self, job: Job, error: BaseException, delay_ms: int, code: int) -> None:
        """A failed attempt's retry was saved (code 0) or refused."""
        self.annotate(job, delay_ms=delay_ms)
        self._push_later(job, "retried", error, code)

    def returned(self, job: Job, reason: BaseException, code: int) -> None:
        """The job was given back untouched (MoveToWait): saved (code 0) or
        refused."""
        self._push_later(job, "returned", reason, code)

    def _push_later(self, job: Job, intended: str, error: Any, code: int) -> None:
        record = self.record(job, intended, error)
        self._pending.append((intended, job.id, record, code))
        if code != 0:
            self._lost.append((job.id, code))
        self._kick()

    def saved(self, entries: Sequence[dict[str, Any]], codes: Sequence[int]) -> None:
        """A batch of finishes was run (their records written with it)."""
        if self.on_lost is None:
            return
        lost = [(e["id"], c) for e, c in zip(entries, codes) if c != 0]
        if lost:
            self._lost += lost
            self._kick()

    def _kick(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        # One write in flight at a time: what ends meanwhile goes in the next.
        while self._pending or self._lost:
            pending, self._pending = self._pending, []
            lost, self._lost = self._lost, []
            try:
                h = self.history
                for intended in sorted({p[0] for p in pending}):
                    some = [p for p in pending if p[0] == intended]
                    await self._push(
                        keys=[h.key(self.prefix, self.queue, p[1]) for p in some],
                        args=[
                            codec.dumps(
                                {"keep": h.keep, "ttl": h.ttl_s, "intended": intended}
                            ),
                            codec.dumps([p[3] for p in some]),
                            *(p[2] for p in some),
                        ],
                    )
                if self.on_lost is not None:
                    for job_id, code in lost:
                        await self.on_lost(job_id, code)
            except Exception as exc:  # noqa: BLE001 - history never fails a worker
                self.log.warning(
                    "worker %s: attempt records of %d job(s) not written (%s)",
                    self.worker,
                    len(pending) + len(lost),
                    exc,
                )

    async def wait(self, timeout: float) -> None:
        """Let pending writes finish, up to `timeout` seconds."""
        if self._writer is not None and not self._writer.done():
            await asyncio.wait({self._writer}, timeout=timeout)


def parse_attempts(raw: Sequence[Any]) -> list[dict[str, Any]]:
    """Records as read from the list (newest first), oldest first by attempt
    number and start; entries that are not JSON objects are left out. (Push
    order is not attempt order: a retry's record is pushed after the retry
    call, by which time the next attempt may already have finished and
    pushed its own.)"""
    out = []
    for item in reversed(raw):
        try:
            record = codec.loads(item)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return sorted(out, key=_attempt_order)


def _attempt_order(record: dict[str, Any]) -> tuple[int, int]:
    """Attempt number, then start (ms); 0 where a record lacks one."""
    number, started = record.get("attempt"), record.get("started_ms")
    return (
        number if isinstance(number, int) else 0,
        started if isinstance(started, int) else 0,
    )
