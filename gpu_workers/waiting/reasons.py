"""Why a job is not running yet: one primary reason with a stable code and
its numbers, plus the other facts that also hold, from facts already read
(reads.py). Pure: no Redis, no clock of its own.

The codes (stable; docs/http-api.md lists them):

- `queue_paused`: the queue is paused
- `no_worker`: no live worker serves the queue (CLIENT LIST, GPU heartbeats)
- `vram_never_fits`: no GPU serving the queue has a budget as large as the
  job's declared VRAM (and which queues' GPUs would fit it)
- `rate_limited`: the queue's rate limiter is full until its window ends
- `global_concurrency`: the queue's global concurrency is reached (n of n)
- `waiting_for_vram`: the job needs more VRAM than any GPU serving the queue
  has uncommitted now
- `delayed`: delayed until a time
- `retry_backoff`: a failed attempt's backoff, until a time (attempt k of n)
- `waiting_for_children`: k of n children still pending
- `group_paused`, `quota_exhausted`, `group_concurrency`,
  `group_rate_limited`, `group_turn`: a grouped job's group (groups.py),
  in place of `queued`
- `queued`: its place in line (exact, or a range far from both ends of a
  long line), with an ETA (or an ETA range) at the measured throughput
- `loading_model`: a claimed (active) job whose worker is loading its
  model onto the GPU, a cold start (loading.py): the model, GPU, host, since
  when and about how long; a waiting job whose model is loading on a GPU
  serving its queue carries it in `also`
- `unknown`: what Redis holds could not be read (the message says why)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from queues import Job
from queues.flow import split_job_key
from queues.ops.queue_actions import MANUAL_LIMIT

from ..units import format_bytes
from .line import in_line, span
from .reads import NOT_TAKING, JobFacts, QueueFacts

CODES = (
    "queue_paused",
    "no_worker",
    "vram_never_fits",
    "rate_limited",
    "global_concurrency",
    "waiting_for_vram",
    "delayed",
    "retry_backoff",
    "waiting_for_children",
    "group_paused",
    "quota_exhausted",
    "group_concurrency",
    "group_rate_limited",
    "group_turn",
    "queued",
    "loading_model",
    "unknown",
)
#: Job states a waiting reason is given for (`paused`: BullMQ 5's list).
WAITING_STATES = frozenset(
    {"waiting", "prioritized", "delayed", "waiting-children", "paused"}
)
#: Ready states: a worker takes such a job once it is at the front.
READY = frozenset({"waiting", "prioritized", "paused"})


@dataclass
class WaitingReason:
    """One reason: a stable code, a sentence, its numbers, and the other
    reasons that also hold (`also`), pending children as (prefix, queue, id)."""

    code: str
    message: str
    numbers: dict[str, Any] = field(default_factory=dict)
    also: list[WaitingReason] = field(default_factory=list)
    children: list[tuple[str, str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The API's `waiting_reason` object: code, message, the numbers,
        `also` (the same, one level) and `pending_children`."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        out.update(self.numbers)
        out["also"] = [
            {"code": r.code, "message": r.message, **r.numbers} for r in self.also
        ]
        if self.children:
            out["pending_children"] = [
                {"prefix": p, "queue": q, "id": i} for p, q, i in self.children
            ]
        return out


def unknown(why: str) -> WaitingReason:
    """The reason when the facts could not be read."""
    return WaitingReason("unknown", f"Unknown: {why}", {"error": why})


def at(ms: int, now_ms: int) -> str:
    """A time as `2026-12-01 17:40:05 UTC (in 12 s)`."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))
    left = ms - now_ms
    return f"{stamp} ({'in ' + span(left) if left > 0 else 'due now'})"


def _live(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if str(r.get("state")) not in NOT_TAKING]


def _budget(r: dict[str, Any]) -> int:
    value = r.get("budget_bytes")
    return value if isinstance(value, int) else 0


def _uncommitted(r: dict[str, Any]) -> int:
    committed = r.get("committed_bytes")
    return max(_budget(r) - (committed if isinstance(committed, int) else 0), 0)


def _would_fit(records: list[dict[str, Any]], need: int) -> list[dict[str, Any]]:
    """GPUs (by host and uuid, with the queues their workers serve) whose
    largest worker budget holds `need`, largest first."""
    gpus: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        snap = r.get("gpu")
        gpu: dict[str, Any] = snap if isinstance(snap, dict) else {}
        key = (str(r.get("host", "")), str(gpu.get("uuid", "")))
        row = gpus.setdefault(
            key,
            {
                "host": key[0],
                "gpu": str(gpu.get("name", "")),
                "uuid": key[1],
                "budget_bytes": 0,
                "queues": [],
            },
        )
        row["budget_bytes"] = max(row["budget_bytes"], _budget(r))
        queue = f"{r.get('prefix', 'bull')}:{r.get('queue', '')}"
        if queue not in row["queues"]:
            row["queues"].append(queue)
    fits = [g for g in gpus.values() if g["budget_bytes"] >= need]
    return sorted(fits, key=lambda g: -g["budget_bytes"])


def _vram(q: QueueFacts, need: int | None) -> WaitingReason | None:
    serving = _live(q.gpu_serving)
    if need is None or not serving:
        return None
    largest = max(_budget(r) for r in serving)
    if need > largest:
        fits = _would_fit(_live(q.gpu_all), need)
        named = [f"{g['gpu'] or g['uuid']} ({', '.join(g['queues'])})" for g in fits]
        where = (
            "; it would fit on " + ", ".join(named[:3])
            if fits
            else "; no GPU seen has a budget that large"
        )
        return WaitingReason(
            "vram_never_fits",
            f"No GPU serving this queue can ever fit it: it needs "
            f"{format_bytes(need)}, the largest budget is {format_bytes(largest)}"
            + where,
            {"need_bytes": need, "largest_budget_bytes": largest, "would_fit": fits},
        )
    most = max(_uncommitted(r) for r in serving)
    if need > most:
        return WaitingReason(
            "waiting_for_vram",
            f"Waiting for VRAM: it needs {format_bytes(need)}, the most "
            f"uncommitted on any GPU serving the queue is {format_bytes(most)}",
            {"need_bytes": need, "most_uncommitted_bytes": most},
        )
    return None


def _line(
    job: Job, state: str, q: QueueFacts, j: JobFacts, floor_ms: int = 0
) -> WaitingReason:
    """Its place in line; the ETA is at least `floor_ms` (a full limiter)."""
    text, numbers = in_line(job, state, q, j, floor_ms)
    return WaitingReason("queued", text, numbers)


def _paused() -> WaitingReason:
    return WaitingReason(
        "queue_paused", "The queue is paused: no worker takes its jobs", {}
    )


def _no_worker(q: QueueFacts) -> WaitingReason | None:
    if q.connected is None and not q.gpu_serving:
        return None  # CLIENT LIST refused and no heartbeat: unknown, not "none"
    if q.live_workers:
        return None
    return WaitingReason(
        "no_worker", "No live worker serves this queue", {"workers": 0}
    )


def _rate(q: QueueFacts, now_ms: int) -> WaitingReason | None:
    """A full limiter: its count at the queue's `max`, or a manual rate limit
    (`Queue.rate_limit`, a processor's RateLimitError, Node's `rateLimit`).
    A worker's own limiter option (no `max` in meta) is not known here, so
    its count alone says nothing."""
    count, ttl = q.limiter_count, q.limiter_pttl_ms
    if count is None or ttl is None:
        return None
    manual = count >= MANUAL_LIMIT
    if not manual and (q.rate_max is None or count < q.rate_max):
        return None
    until = now_ms + ttl
    if manual:
        text = f"Rate-limited by hand (a manual rate limit) until {at(until, now_ms)}"
    else:
        text = (
            f"Rate-limited until {at(until, now_ms)}: {count} "
            f"job{'s' if count != 1 else ''} started in this window "
            f"(limit {q.rate_max})"
        )
    return WaitingReason(
        "rate_limited",
        text,
        {
            "until_ms": until,
            "in_ms": ttl,
            "started_in_window": None if manual else count,
            "max": q.rate_max,
        },
    )


def _limits(q: QueueFacts, now_ms: int) -> list[WaitingReason]:
    rate = _rate(q, now_ms)
    found = [rate] if rate is not None else []
    if q.concurrency is not None and (q.active or 0) >= q.concurrency:
        found.append(
            WaitingReason(
                "global_concurrency",
                f"Global concurrency reached: {q.active} of {q.concurrency} "
                "jobs running",
                {"active": q.active, "concurrency": q.concurrency},
            )
        )
    return found


#: Characters of a last error a message quotes (the number holds it whole).
ERROR_CHARS = 300


def _timed(job: Job, j: JobFacts, now_ms: int, error: str | None) -> WaitingReason:
    due = j.due_ms
    numbers: dict[str, Any] = {"until_ms": due}
    if due is not None:
        numbers["in_ms"] = max(due - now_ms, 0)
    when = at(due, now_ms) if due is not None else "an unknown time"
    if job.attempts_made > 0:
        numbers.update(
            attempt=job.attempts_made + 1,
            attempts=job.attempts,
            last_error=error,
        )
        # As the job lists say it ("retry k of n"), with the attempt it is.
        made = job.attempts_made
        text = (
            f"Retry backoff: retry {made} of {max(job.attempts - 1, made)} "
            f"(attempt {made + 1} of {max(job.attempts, made + 1)}) at {when}"
        )
        if error:
            cut = error if len(error) <= ERROR_CHARS else error[: ERROR_CHARS - 1] + "…"
            text += f"; last error: {cut}"
        return WaitingReason("retry_backoff", text, numbers)
    return WaitingReason("delayed", f"Delayed until {when}", numbers)


def _children(j: JobFacts, prefix: str) -> WaitingReason:
    pending = j.pending_children
    total = None
    if pending is not None:
        total = pending + (j.done_children or 0) + (j.failed_children or 0)
    reason = WaitingReason(
        "waiting_for_children",
        f"Waiting for children: {pending if pending is not None else '?'} of "
        f"{total if total is not None else '?'} pending",
        {"pending": pending, "total": total, "failed": j.failed_children},
    )
    for key in j.children_sample:
        try:
            reason.children.append(split_job_key(key, prefix))
        except ValueError:
            continue  # not a job key another client could mean
    return reason


def explain_one(
    job: Job,
    state: str,
    q: QueueFacts,
    j: JobFacts,
    need: int | None,
    prefix: str,
    now_ms: int,
    error: str | None = None,
    grouped: list[WaitingReason] | None = None,
) -> WaitingReason | None:
    """The reason a job in `state` is not running, or None for a job that is
    not waiting (active, finished, unknown); `error`: its last error as it may
    be shown (redacted); `grouped`: a grouped job's group reasons
    (groups.py), which stand in for its place in the queue's line."""
    if state not in WAITING_STATES:
        return None
    found: list[WaitingReason] = []
    if state == "waiting-children":
        found.append(_children(j, prefix))
    elif state == "delayed":
        found.append(_timed(job, j, now_ms, error))
    if q.paused or state == "paused":
        found.append(_paused())
    idle = _no_worker(q)
    if idle is not None:
        found.append(idle)
    vram = _vram(q, need)
    if vram is not None and vram.code == "vram_never_fits":
        found.append(vram)
    if state in READY:
        limits = _limits(q, now_ms)
        found.extend(limits)
        # After the queue's limits: a job waits for VRAM once it is claimed.
        if vram is not None and vram.code == "waiting_for_vram":
            found.append(vram)
        if grouped:
            found.extend(grouped)
        else:
            floor = max((r.numbers.get("in_ms", 0) for r in limits), default=0)
            found.append(_line(job, state, q, j, floor))
    primary, *also = found
    primary.also = also
    return primary
