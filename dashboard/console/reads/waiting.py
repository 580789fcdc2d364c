"""Why jobs wait, for the pages: `gpu_workers.waiting` on the pages' client
with the dashboard's namespace, handler modules and redaction, a short tag for
list rows, and a CLIENT LIST census reused for a few seconds (a list page and
its refreshes cost one census, not one per row or per refresh)."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef
from dashboard.shared.redaction import redact_text
from dashboard.shared.redis import REDIS_DOWN, client
from gpu_workers.units import format_bytes
from gpu_workers.waiting import EXPLAINED_STATES, WaitingReason, explain
from queues import Job

from .overview import known_census

#: Codes of reasons that hold a job until an operator acts (shown in red).
STUCK = frozenset({"queue_paused", "no_worker", "vram_never_fits", "unknown"})
#: Codes of reasons about VRAM (the job page links the GPU page).
GPU = frozenset({"waiting_for_vram", "vram_never_fits", "loading_model"})


def reasons(
    ref: QueueRef, pairs: Sequence[tuple[Job, str]]
) -> dict[str, WaitingReason]:
    """The waiting reason of each waiting job of `pairs` (job, state), and of
    each active one whose worker still loads its model, by id:
    the queue's facts read once for them all. A Redis that refuses (not one
    that is down: pages answer 503 for that) gives none rather than an error."""
    if not any(state in EXPLAINED_STATES for _, state in pairs):
        return {}
    conn = client()
    c = conf.get()
    try:
        return explain(
            conn,
            ref.prefix,
            ref.name,
            pairs,
            namespace=c.namespace,
            handler_modules=c.handler_modules,
            workers=known_census(),
            shown=redact_text,
        )
    except REDIS_DOWN:
        raise
    except redis.RedisError:
        return {}


def job_reason(ref: QueueRef, job: Job, state: str) -> WaitingReason | None:
    """One job's waiting reason (None when it is not waiting)."""
    return reasons(ref, [(job, state)]).get(job.id)


def tag(reason: WaitingReason | None) -> str:
    """A list row's short tag for a reason ("" for none)."""
    if reason is None:
        return ""
    n = reason.numbers
    if reason.code == "queued":
        ahead = n.get("ahead")
        if ahead is not None:
            return "next" if ahead == 0 else f"{ahead:,} ahead"
        if "ahead_at_least" in n:
            return f"{n['ahead_at_least']:,}–{n['ahead_at_most']:,} ahead"
        return "queued"  # it moved, or BullMQ 5's paused list
    if reason.code == "global_concurrency":
        return f"concurrency {n.get('active')}/{n.get('concurrency')}"
    if reason.code == "waiting_for_children":
        return f"children {n.get('pending', '?')}/{n.get('total', '?')}"
    if reason.code == "loading_model":
        return f"loading {n.get('model', 'model')}"
    if reason.code == "waiting_for_vram":
        return f"needs {format_bytes(n['need_bytes'])} VRAM"
    return _TAGS.get(reason.code, reason.code)


_TAGS = {
    "queue_paused": "paused",
    "no_worker": "no worker",
    "vram_never_fits": "never fits a GPU",
    "rate_limited": "rate-limited",
    "delayed": "delayed",
    "retry_backoff": "retry backoff",
    "unknown": "unknown",
}
