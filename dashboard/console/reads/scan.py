"""Bounded, resumable scans of one state of a queue: job search and failure triage.

A scan reads at most `cap` jobs per request, page by page (each page O(page) in
Redis), and returns a cursor (an offset into the state's ordering) to continue
from. Jobs that move while an operator pages through may be skipped or seen
twice; a scan never blocks Redis or the request on a million jobs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef
from dashboard.shared.redaction import compact, redact, redact_text
from queues import Job, codec, ops
from queues.drive import cmd, gather, guarded
from queues.keys import QueueKeys

from . import run
from .queue import page, queue_counts

#: Jobs read per Redis round trip while scanning.
BATCH = 200
#: Example job ids kept per triage group.
EXAMPLES = 5
#: Longest normalised reason.
REASON_CHARS = 160


@dataclass
class Scan:
    """What one bounded scan request found, and where to continue."""

    state: str
    start: int
    total: int
    scanned: int = 0
    next_cursor: int | None = None
    jobs: list[Job] = field(default_factory=list)
    #: Jobs read whose data was too large to read (`conf.list_value_max_bytes`).
    data_left_out: int = 0


def scan(
    ref: QueueRef,
    state: str,
    cursor: int,
    keep: Callable[[Job], bool],
    cap: int | None = None,
    max_matches: int | None = None,
) -> Scan:
    """Jobs of `state` (newest first) from offset `cursor` that `keep` accepts,
    reading at most `cap` jobs and stopping after `max_matches` matches."""
    cap = cap or conf.get().scan_cap
    total = queue_counts([ref], state)[0][state]
    result = Scan(state, cursor, total)
    position = max(cursor, 0)
    while position < total and result.scanned < cap:
        size = min(BATCH, cap - result.scanned, total - position)
        jobs = page(ref, [state], position, position + size - 1, False)
        for i, job in enumerate(jobs):
            if "data" in job.left_out:
                result.data_left_out += 1
            if not keep(job):
                continue
            result.jobs.append(job)
            if max_matches and len(result.jobs) >= max_matches:
                # Resume after this job. A page skips ids whose hash vanished,
                # so i is at most its offset: resuming there re-reads, never skips.
                result.scanned += i + 1
                after = position + i + 1
                result.next_cursor = after if after < total else None
                return result
        position += size
        result.scanned += size
    result.next_cursor = position if position < total else None
    return result


# --- search ------------------------------------------------------------------
class BadPath(ValueError):
    """Raised when a JSON path cannot be parsed."""


_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def parse_path(path: str) -> list[str | int]:
    """`$.a.b[0].c`, `a.b.0.c` -> ["a", "b", 0, "c"]."""
    text = path.strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _STEP.match(text, pos)
        if not m or m.end() == pos:
            raise BadPath(f"cannot read JSON path {path!r} at {text[pos:]!r}")
        steps.append(int(m.group(2)) if m.group(2) is not None else m.group(1))
        pos = m.end()
    if not steps:
        raise BadPath("the JSON path is empty")
    return steps


_MISSING = object()


def resolve(value: Any, steps: Sequence[str | int]) -> Any:
    """The value at a parsed path, or _MISSING."""
    for step in steps:
        if isinstance(value, dict):
            key = str(step)
            if key not in value:
                return _MISSING
            value = value[key]
        elif isinstance(value, list):
            try:
                value = value[int(step)]
            except (ValueError, IndexError):
                return _MISSING
        else:
            return _MISSING
    return value


def _equals(found: Any, wanted: str) -> bool:
    try:
        if codec.loads(wanted) == found:
            return True
    except codec.JSONDecodeError:
        pass
    return isinstance(found, str) and found == wanted


def matcher(name: str = "", text: str = "", path: str = "", value: str = "") -> Any:
    """A predicate on jobs: name contains `name`, data (as shown, redacted)
    contains `text`, data has `path` (equal to `value` when given); all
    case-insensitive except the path value."""
    steps = parse_path(path) if path else None
    name_l, text_l = name.lower(), text.lower()

    def keep(job: Job) -> bool:
        if name_l and name_l not in job.name.lower():
            return False
        if not (text_l or steps):
            return True
        data = redact(job.data)
        if text_l and text_l not in compact(data).lower():
            return False
        if steps is not None:
            found = resolve(data, steps)
            if found is _MISSING or (value and not _equals(found, value)):
                return False
        return True

    return keep


# --- failure triage ------------------------------------------------------------
_NORMALISE = [
    (
        re.compile(
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I
        ),
        "<uuid>",
    ),
    (re.compile(r"0x[0-9a-f]+", re.I), "<hex>"),
    (re.compile(r"\b[0-9a-f]{16,}\b", re.I), "<hex>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<str>"),
    (re.compile(r"(?<![A-Za-z])-?\d+(\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
]


def normalise_reason(reason: str | None) -> str:
    """A failure reason with ids, numbers and quoted values blanked out, so
    that e.g. every "CUDA out of memory. Tried to allocate 2.00 GiB" groups."""
    text = (reason or "").strip().splitlines()[0] if (reason or "").strip() else ""
    for pattern, replacement in _NORMALISE:
        text = pattern.sub(replacement, text)
    text = text.strip()[:REASON_CHARS]
    return text or "(no reason)"


def signature(normalised: str) -> str:
    """A short stable id of a normalised reason (used in forms and URLs)."""
    return hashlib.sha1(normalised.encode()).hexdigest()[:16]


@dataclass
class Group:
    """Failed jobs sharing a normalised reason within one scanned window."""

    reason: str
    signature: str
    example_reason: str
    ids: list[str] = field(default_factory=list)
    latest_ms: int = 0

    @property
    def count(self) -> int:
        """Jobs of the group in the window."""
        return len(self.ids)


def triage(
    ref: QueueRef, cursor: int, cap: int | None = None
) -> tuple[Scan, list[Group]]:
    """Failed jobs from `cursor` (at most `cap`) grouped by normalised reason,
    largest group first."""
    groups: dict[str, Group] = {}

    def keep(job: Job) -> bool:
        reason = normalise_reason(job.failed_reason)
        group = groups.get(reason)
        if group is None:
            group = groups[reason] = Group(
                redact_text(reason),
                signature(reason),
                redact_text(job.failed_reason)[:500],
            )
        group.ids.append(job.id)
        group.latest_ms = max(group.latest_ms, job.finished_on or 0)
        return False

    window = scan(ref, "failed", cursor, keep, cap)
    return window, sorted(groups.values(), key=lambda g: (-g.count, g.reason))


def retry_group(ref: QueueRef, ids: Sequence[str], sig: str) -> tuple[int, int]:
    """Retry those of `ids` that are still failed with a reason of signature
    `sig`, in batched pipelines; returns (retried, skipped)."""
    keys = QueueKeys(ref.name, ref.prefix)
    ids = list(dict.fromkeys(ids))[: conf.get().scan_cap]
    retried = skipped = 0
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        found = run(
            gather(
                [
                    gather(
                        [
                            cmd("HMGET", keys.job(i), "failedReason", "opts"),
                            ops.get_state(keys, i),
                        ]
                    )
                    for i in chunk
                ]
            )
        )
        todo = []
        for job_id, ((reason, raw_opts), state) in zip(chunk, found):
            if state.value != "failed" or signature(normalise_reason(reason)) != sig:
                skipped += 1
                continue
            lifo = bool(_loads(raw_opts).get("lifo"))
            todo.append(
                guarded(ops.reprocess(keys, job_id, "failed", lifo, False, False))
            )
        outcomes = run(gather(todo)) if todo else []
        errors = sum(isinstance(o, Exception) for o in outcomes)
        retried += len(outcomes) - errors
        skipped += errors
    return retried, skipped


def _loads(raw: str | None) -> dict[str, Any]:
    try:
        value = codec.loads(raw) if raw else {}
    except codec.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
