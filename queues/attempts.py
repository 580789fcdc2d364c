"""Attempt history: one record per attempt of a job, kept in Redis.

A worker writes a record when an attempt's end is known to Redis: the
finish (completed or failed for good) or the retry was saved, or refused
(its lock was lost: the record says `lost`, with the code, never what the
processor hoped). One pipelined write per attempt end (one per finished
batch): LPUSH the JSON record, LTRIM to the newest `keep`, EXPIRE.

The list lives at `attempts_key()` (`bullpen:attempts:{prefix}:{queue}:{id}`),
outside the queue's keys, so BullMQ's scripts and Node workers never see it.
BullMQ removes jobs in Lua, which never deletes it: the TTL, renewed on
each write, removes an orphan history.

A record (JSON object): `attempt` (the job's attemptsStarted when claimed),
`started_ms` (processedOn), `ended_ms`, `worker`, `host`, `pid`, `outcome`
(completed | failed | retried | lost), `error` (the failure, or for `lost`
why the finish was refused), `code` and `intended` (lost only),
`delay_ms` (retried only), plus what the worker adds with `annotate()`
(a GPU worker: gpu, simulated, declared_bytes, peak_bytes...).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import codec, defaults
from .exceptions import code_message
from .job import Job
from .keys import attempts_key

#: Outcomes of an attempt as saved.
OUTCOMES = ("completed", "failed", "retried", "lost")
#: Called for each record with the write's pipeline, the job id and the
#: record, to add writes of its own to the same round trip.
AlsoWrite = Callable[[Any, str, dict[str, Any]], None]


@dataclass(frozen=True)
class AttemptHistory:
    """Where a worker keeps attempt records, and how many for how long."""

    namespace: str = defaults.ATTEMPTS_NAMESPACE
    keep: int = defaults.ATTEMPTS_KEEP
    ttl_s: int = defaults.ATTEMPTS_TTL_S

    def __post_init__(self) -> None:
        if self.keep < 1 or self.ttl_s < 1:
            raise ValueError("attempt history needs keep >= 1 and ttl_s >= 1")

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
    """Writes the attempt records of one worker's jobs (see the module doc)."""

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
        self.also: AlsoWrite | None = None
        self._notes: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._ended: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._writes: set[asyncio.Task[None]] = set()

    def annotate(self, job: Job, **fields: Any) -> None:
        """Add fields to the record of `job`'s current attempt (before it ends)."""
        self._notes.setdefault((job.id, job.token), {}).update(fields)

    def _record(self, job: Job, outcome: str, error: Any) -> dict[str, Any]:
        record: dict[str, Any] = {
            "attempt": job.attempts_started or job.attempts_made + 1,
            "started_ms": job.processed_on,
            "ended_ms": int(time.time() * 1000),
            "worker": self.worker,
            "host": self.host,
            "pid": self.pid,
            "outcome": outcome,
            "error": _error_text(error),
        }
        record.update(self._notes.pop((job.id, job.token), {}))
        return record

    def ended(self, job: Job, outcome: str, error: BaseException | None) -> None:
        """The processor's outcome, recorded once its save is known (saved())."""
        self._ended[(job.id, job.token)] = self._record(job, outcome, error)

    def retried(self, job: Job, error: BaseException, delay_ms: int, code: int) -> None:
        """A failed attempt's retry was saved (code 0) or refused."""
        record = self._record(job, "retried", error)
        record["delay_ms"] = delay_ms
        if code != 0:
            self._refused(job.id, record, code)
        self._write([(job.id, record)])

    def saved(self, entries: Sequence[dict[str, Any]], codes: Sequence[int]) -> None:
        """A batch of finishes was run: code 0 saved, else refused."""
        records = []
        for entry, code in zip(entries, codes):
            record = self._ended.pop((entry["id"], entry["token"]), None)
            if record is None:
                continue
            if code != 0:
                self._refused(entry["id"], record, code)
            records.append((entry["id"], record))
        if records:
            self._write(records)

    def forget(self, job: Job) -> None:
        """Drop what is held for `job` (its end will not be saved by us)."""
        self._notes.pop((job.id, job.token), None)
        self._ended.pop((job.id, job.token), None)

    @staticmethod
    def _refused(job_id: str, record: dict[str, Any], code: int) -> None:
        intended = record["outcome"]
        record["intended"] = intended
        record["code"] = code
        record["outcome"] = "lost"
        why = f"not saved: {code_message(code, job_id)} (code {code})"
        record["error"] = _error_text(
            f"{why}; the processor's outcome was {intended}"
            + (f": {record['error']}" if record["error"] else "")
        )

    def _write(self, records: list[tuple[str, dict[str, Any]]]) -> None:
        task = asyncio.ensure_future(self._send(records))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _send(self, records: list[tuple[str, dict[str, Any]]]) -> None:
        h = self.history
        try:
            pipe = self.client.pipeline(transaction=False)
            for job_id, record in records:
                key = h.key(self.prefix, self.queue, job_id)
                pipe.lpush(key, codec.dumps(record))
                pipe.ltrim(key, 0, h.keep - 1)
                pipe.expire(key, h.ttl_s)
                if self.also is not None:
                    self.also(pipe, job_id, record)
            await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - history never fails a worker
            self.log.warning(
                "worker %s: attempt records of %d job(s) not written (%s)",
                self.worker,
                len(records),
                exc,
            )

    async def wait(self, timeout: float) -> None:
        """Let pending writes finish, up to `timeout` seconds."""
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=timeout)


def parse_attempts(raw: Sequence[Any]) -> list[dict[str, Any]]:
    """Records as read from the list (newest first), oldest first; entries
    that are not JSON objects are left out."""
    out = []
    for item in reversed(raw):
        try:
            record = codec.loads(item)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out
