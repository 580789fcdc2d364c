"""The read model of a job's attempts: Bullpen's attempt records
(queues/attempts.py) or, for a job no Bullpen worker ran (a Node BullMQ
worker's), what BullMQ's own fields tell: attemptsStarted/attemptsMade, the
stack traces of failed attempts, failedReason, processedOn and finishedOn of
the last attempt."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

from queues import Job
from queues.exceptions import code_message
from queues.state import JobState

from .fleet import Fleet

#: The fields of a row the API shows (its `AttemptHistory` schema).
API_FIELDS = (
    "attempt",
    "started_ms",
    "ended_ms",
    "duration_ms",
    "worker",
    "host",
    "pid",
    "gpu",
    "gpu_seconds",
    "outcome",
    "error",
    "code",
    "delay_ms",
)
#: Where the rows come from.
RECORDED = "recorded"
FROM_BULLMQ = "bullmq"


@dataclass
class Attempts:
    """The rows of a job's attempt table, oldest first, and their source."""

    def as_dict(self) -> dict[str, Any]:
        """The API's `attempt_history` (its `AttemptHistory` schema)."""
        return {
            "source": self.source,
            "started": self.started,
            "unrecorded": self.unrecorded,
            "gpu_seconds": self.gpu_seconds,
            "items": [{k: row.get(k) for k in API_FIELDS} for row in self.rows],
        }

    source: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: Attempts BullMQ counts as started (attemptsStarted, else attemptsMade).
    started: int = 0
    #: Started attempts with no row (crashed workers, Node workers, trimmed).
    unrecorded: int = 0

    @property
    def gpu_seconds(self) -> float | None:
        """GPU-seconds of the attempts that ran on a GPU (None: none did)."""
        values = [
            float(r["gpu_seconds"])
            for r in self.rows
            if isinstance(r.get("gpu_seconds"), (int, float))
            and not isinstance(r.get("gpu_seconds"), bool)
        ]
        return round(sum(values), 3) if values else None


def first_line(text: str | None) -> str:
    """The line of an error worth a table cell: a Python traceback's last
    line (the exception), otherwise the first (a message, a JS stack's head)."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback (most recent call last)"):
        return lines[-1]
    return lines[0]


def _row(record: dict[str, Any], job_id: str = "") -> dict[str, Any]:
    row = dict(record)
    row.setdefault("error", None)
    code = row.get("code")
    if row.get("outcome") == "lost" and isinstance(code, int):
        # Say why, and what the worker had meant to save.
        why = f"not saved: {code_message(code, job_id)} (code {code})"
        hoped = f"; the worker's outcome was {row.get('intended', 'unknown')}"
        row["error"] = why + hoped + (f": {row['error']}" if row["error"] else "")
    start, end = row.get("started_ms"), row.get("ended_ms")
    row["duration_ms"] = (
        max(end - start, 0) if isinstance(start, int) and isinstance(end, int) else None
    )
    row["error_line"] = first_line(row.get("error"))
    return row


def job_attempts(
    fleet: Fleet, prefix: str, queue: str, job: Job, state: str
) -> Attempts:
    """The attempts of `job` (in `state`), recorded or derived."""
    try:
        records = fleet.job_attempts(queue, job.id, prefix)
    except redis.RedisError:
        records = []
    started = max(job.attempts_started, job.attempts_made)
    if not records:
        return from_bullmq(job, state)
    rows = [_row(r, job.id) for r in records]
    last = rows[-1].get("attempt")
    if state == JobState.ACTIVE.value and isinstance(last, int) and last < started:
        rows.append(_running(job, started))
    recorded = {r.get("attempt") for r in rows}
    missing = sum(1 for n in range(1, started + 1) if n not in recorded)
    return Attempts(RECORDED, rows, started, missing)


def _running(job: Job, n: int) -> dict[str, Any]:
    return _row({"attempt": n, "started_ms": job.processed_on, "outcome": "running"})


def from_bullmq(job: Job, state: str) -> Attempts:
    """Rows from BullMQ's fields alone: every attempt numbered, the errors
    of failed ones from their stack traces (BullMQ keeps the newest
    stackTraceLimit), times for the last attempt only."""
    started = max(job.attempts_started, job.attempts_made)
    if started == 0:
        return Attempts(FROM_BULLMQ)
    running = state == JobState.ACTIVE.value
    # Attempts that ended in a failure: all but a completed or running last.
    last_ok = state == JobState.COMPLETED.value or running
    failures = started - 1 if last_ok else started
    traces = list(job.stacktrace)[-failures:] if failures > 0 else []
    errors: list[str | None] = [None] * (failures - len(traces)) + [
        str(t) for t in traces
    ]
    rows = []
    for n in range(1, started + 1):
        row: dict[str, Any] = {"attempt": n}
        if n <= failures:
            final = n == started and state == JobState.FAILED.value
            row["outcome"] = "failed" if final else "retried"
            row["error"] = errors[n - 1]
            if final and job.failed_reason:
                row["error"] = job.failed_reason
        elif running:
            row["outcome"] = "running"
        else:
            row["outcome"] = "completed"
        if n == started:
            row["started_ms"] = job.processed_on
            if not running:
                row["ended_ms"] = job.finished_on
        rows.append(_row(row))
    return Attempts(FROM_BULLMQ, rows, started, started)
