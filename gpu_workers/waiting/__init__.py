"""Why is this job waiting? One primary reason per job (a stable code, a
sentence and its numbers) with the other facts that also hold, computed from
Redis with a bounded number of round trips whatever the queue's length:

- one pipeline for the queue's facts and every job's own (reads.py)
- one CLIENT LIST per primary for the connected workers (or a census given)
- the fleet's heartbeats (`Fleet.list_workers`: two round trips)

    reasons = explain(conn, "bull", "render", [(job, "waiting")])
    reasons[job.id].code, reasons[job.id].message

Both the dashboard's pages and its producer API call it, so it lives below
them, beside the fleet read model it needs; it never imports Django.
`reasons.py` lists the codes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from queues import Job, ops
from queues.drive import run_sync
from queues.keys import QueueKeys

from .. import defaults
from ..fleet import Fleet
from .needs import declared_need
from .reads import QueueFacts, census, connected_workers, facts_op
from .reasons import CODES, WAITING_STATES, WaitingReason, explain_one, unknown

__all__ = ["CODES", "WAITING_STATES", "WaitingReason", "explain"]

_NO_CENSUS: Any = object()


def explain(
    conn: Any,
    prefix: str,
    queue: str,
    jobs: Sequence[tuple[Job, str]],
    *,
    namespace: str = defaults.NAMESPACE,
    handler_modules: Iterable[str] = (),
    workers: Counter[str] | None = _NO_CENSUS,
    shown: Callable[[str], str] = str,
    now_ms: int | None = None,
) -> dict[str, WaitingReason]:
    """The waiting reason of each (job, state) whose state is a waiting one,
    by job id. `workers`: a CLIENT LIST census already taken (else one is);
    `handler_modules`: where to find a job's declared VRAM when no GPU worker
    recorded it yet; `shown`: how a last error may be shown (redaction).
    Odd data never raises: it reads as `unknown`."""
    waiting = [(job, state) for job, state in jobs if state in WAITING_STATES]
    if not waiting:
        return {}
    now_ms = now_ms or ops.now_ms()
    fleet = Fleet(conn, namespace)
    keys = QueueKeys(queue, prefix)
    wanted = [(job.id, state, _priority(job)) for job, state in waiting]
    try:
        q, per_job = run_sync(facts_op(keys, fleet.keys, wanted, now_ms), conn)
    except redis.ResponseError as exc:
        return {job.id: unknown(f"Redis refused a read: {exc}") for job, _ in waiting}
    _add_workers(q, conn, fleet, keys, workers)
    modules = tuple(handler_modules)
    found = {}
    for (job, state), j in zip(waiting, per_job):
        try:
            need = j.declared_bytes
            if need is None and "data" not in job.left_out:
                need = declared_need(job.name, job.data, modules)
            error = shown(job.failed_reason) if job.failed_reason else None
            reason = explain_one(job, state, q, j, need, prefix, now_ms, error)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
            reason = unknown(f"unreadable job fields ({exc})")
        if reason is not None:
            found[job.id] = reason
    return found


def _priority(job: Job) -> int:
    return job.priority if isinstance(job.priority, int) else 0


def _add_workers(
    q: QueueFacts,
    conn: Any,
    fleet: Fleet,
    keys: QueueKeys,
    workers: Counter[str] | None,
) -> None:
    """Fill in the connected workers and the GPU heartbeats; a refused read
    leaves them unknown rather than failing the reason."""
    try:
        taken = census(conn) if workers is _NO_CENSUS else workers
    except redis.ResponseError:
        taken = None
    q.connected = connected_workers(taken, keys)
    try:
        records = fleet.list_workers()
    except redis.ResponseError:
        records = []
    q.gpu_all = records
    mine = (keys.prefix, keys.name)
    q.gpu_serving = [r for r in records if (r.get("prefix"), r.get("queue")) == mine]
