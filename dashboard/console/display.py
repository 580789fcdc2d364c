"""Showing untrusted job data: truncation, pretty JSON, and the row a job
list shows (redaction is in redaction.py). Nothing here marks text safe:
templates escape all of it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dashboard.shared import conf
from dashboard.shared.redaction import compact, redact, redact_text
from gpu_workers.units import format_bytes
from queues import Job, codec
from queues.names import is_group_id

ELLIPSIS = "…"
#: Longest job name a list row holds.
NAME_CHARS = 400
#: Longest failed reason a list row shows.
REASON_CHARS = 200


def truncate(text: str, cap: int) -> tuple[str, bool]:
    """`text` cut to `cap` characters (with an ellipsis) and whether it was cut."""
    if len(text) <= cap:
        return text, False
    return text[:cap] + ELLIPSIS, True


def pretty(value: Any, cap: int | None = None) -> tuple[str, bool]:
    """Indented JSON of a value, cut at `cap` characters when given."""
    text = json.dumps(value, ensure_ascii=False, default=str, indent=2)
    return truncate(text, cap) if cap else (text, False)


def too_large(job: Job, field: str) -> str:
    """What a view shows instead of a value a capped read left out ("" when
    the value was read)."""
    size = job.left_out.get(field)
    return "" if size is None else f"({format_bytes(size)}, too large to show here)"


def preview(job: Job) -> str:
    """The job's data as a list row shows it: redacted, compact, truncated."""
    if "data" in job.left_out:
        return too_large(job, "data")
    text, _ = truncate(compact(redact(job.data)), conf.get().data_preview_chars)
    return text


def progress_parts(progress: Any) -> tuple[float | None, str]:
    """(percent for a bar, or None; text) of a job's progress (a number or
    any JSON value; objects with a numeric `percent` or `progress` get a bar)."""
    number = progress
    if isinstance(progress, dict):
        number = progress.get("percent", progress.get("progress"))
    if isinstance(number, (int, float)) and not isinstance(number, bool):
        pct = max(0.0, min(100.0, float(number)))
        if progress is number and pct == 0:
            return 0.0, ""
        text = f"{pct:g}%" if progress is number else truncate(compact(progress), 60)[0]
        return pct, text
    if progress in (None, "", 0):
        return None, ""
    return None, truncate(compact(progress), 60)[0]


#: States of a job that has not started its next attempt yet.
PENDING = frozenset({"waiting", "prioritized", "delayed"})


def attempts_text(made: int, allowed: int) -> str:
    """Attempts made against the limit, in words that stay true after a
    manual retry (which runs a job past its `attempts`, never "2/1")."""
    if made <= allowed:
        return f"{made} of {allowed}"
    return f"{made} ({allowed} allowed; retried by hand)"


def retry_text(job: Job, state: str) -> str:
    """ "retry k of n" for a job waiting to run again after a failed attempt
    ("" for any other job): it is not a scheduled job, and the progress it
    last reported belongs to the failed attempt."""
    made = job.attempts_made
    if state not in PENDING or not made:
        return ""
    retries = job.attempts - 1
    if made <= retries:
        return f"retry {made} of {retries}"
    return f"retried by hand (attempt {made + 1})"


#: Integer fields of a job hash that Bullpen reads with a fallback (0, unset).
NUMERIC_FIELDS = (
    "timestamp",
    "delay",
    "priority",
    "processedOn",
    "finishedOn",
    "atm",
    "ats",
    "stc",
    "attemptsMade",
)


def oddities(job: Job) -> str:
    """What another client wrote into this job that the pages show with a
    fallback (a non-numeric timestamp, an id with line breaks), or ""."""
    found = [
        f"{name} {truncate(job.raw[name], 40)[0]!r} is not a number"
        for name in NUMERIC_FIELDS
        if job.raw.get(name) and codec.to_int(job.raw[name]) is None
    ]
    if not job.id.isprintable():
        found.append("its id holds line breaks or control characters")
    return "; ".join(found)


@dataclass
class JobRow:
    """One row of a job list."""

    id: str
    name: str
    state: str
    live_key: str
    progress_pct: float | None
    progress_text: str
    added_ms: int
    started_ms: int | None
    finished_ms: int | None
    duration_ms: int | None
    processed_by: str | None
    preview: str
    failed_reason: str
    attempts_text: str
    #: "retry k of n" while the job waits to run again ("" otherwise).
    retry: str
    #: When a delayed job runs (epoch ms), when the list read it.
    run_at_ms: int | None = None
    #: What another client wrote oddly (see `oddities`), or "".
    odd: str = ""
    #: Why it waits (reads/waiting.py): a short tag and the whole sentence.
    waiting_tag: str = ""
    waiting_message: str = ""
    waiting_code: str = ""
    waiting_stuck: bool = False
    #: Its group (docs/groups.md), when it has a valid one; else None.
    group: str | None = None


def job_group(job: Job) -> str | None:
    """The group a job belongs to (`Job.group`: the `gid` Bullpen placed it
    by, else the id its options ask for, a Node job not adopted yet); None
    when that is not a group id."""
    found = job.group
    return found if is_group_id(found) else None


def job_row(
    job: Job, state: str, queue_key: str, now_ms: int, run_at_ms: int | None = None
) -> JobRow:
    """A job as its list row shows it (data, progress and failed reason
    redacted, and truncated); `run_at_ms`: when it runs, for a delayed job."""
    retry = retry_text(job, state)
    pct, text = (None, "") if retry else progress_parts(redact(job.progress))
    duration = None
    if job.processed_on:
        end = job.finished_on or (now_ms if state == "active" else None)
        duration = end - job.processed_on if end else None
    return JobRow(
        id=job.id,
        # Shown cut by CSS, whole (up to NAME_CHARS) in the cell's title.
        name=truncate(job.name, NAME_CHARS)[0],
        state=state,
        live_key=f"{queue_key}:{job.id}",
        progress_pct=pct,
        progress_text=text,
        added_ms=job.timestamp,
        started_ms=job.processed_on,
        finished_ms=job.finished_on,
        duration_ms=duration,
        processed_by=job.processed_by,
        preview=preview(job),
        failed_reason=too_large(job, "failedReason")
        or truncate(redact_text(job.failed_reason), REASON_CHARS)[0],
        attempts_text=attempts_text(job.attempts_made, job.attempts),
        retry=retry,
        run_at_ms=run_at_ms,
        odd=oddities(job),
        group=job_group(job),
    )


def sparkline(
    values: list[int], width: int = 120, height: int = 24, top: int = 0
) -> str:
    """SVG polyline points for a series (numbers only, so safe in an attribute),
    scaled to `top` (default: the series' own peak). Series drawn together
    share one `top`, so one failure does not draw the spike of 28 completions."""
    if not values:
        return ""
    top = max(top, *values, 1)
    step = width / max(len(values) - 1, 1)
    return " ".join(
        f"{i * step:.1f},{height - 1 - (v / top) * (height - 2):.1f}"
        for i, v in enumerate(values)
    )
