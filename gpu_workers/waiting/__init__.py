"""Why is this job waiting? One primary reason per job (a stable code, a
sentence and its numbers) with the other facts that also hold, computed from
Redis with a bounded number of round trips whatever the queue's length:

- one pipeline for the queue's facts and every job's own (reads.py)
- one more for the groups of the grouped jobs among them (groups.py)
- one CLIENT LIST per primary for the connected workers (or a census given)
- the fleet's heartbeats (`Fleet.list_workers`: two round trips)
- for a model loading with no expected time of its own, one HMGET of the
  measured loads (`models:stats`)

An active job gets a reason only while its worker loads its model
(`loading_model`, loading.py); only active jobs cost no queue reads, just the
heartbeats.

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
from .groups import GROUPED, group_facts_op, group_reasons, job_group
from .loading import (
    Loading,
    expected,
    loading_jobs,
    loading_models,
    loading_reason,
    with_past_loads,
)
from .needs import declared_need, job_model
from .reads import GROUPED_DELAYED, QueueFacts, census, connected_workers, facts_op
from .reasons import (
    CODES,
    READY,
    WAITING_STATES,
    WaitingReason,
    explain_one,
    unknown,
)

__all__ = ["CODES", "EXPLAINED_STATES", "WAITING_STATES", "WaitingReason", "explain"]

ACTIVE = "active"
#: States a reason may be given for: the waiting ones, and active jobs whose
#: worker is still loading their model (`loading_model`).
EXPLAINED_STATES = WAITING_STATES | {ACTIVE}

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
    and of each active job whose worker is loading its model
    (`loading_model`), by job id. `workers`: a CLIENT LIST census already
    taken (else one is); `handler_modules`: where to find a job's declared
    VRAM and model when no GPU worker recorded it yet; `shown`: how a last
    error may be shown (redaction). Odd data never raises: it reads as
    `unknown`."""
    waiting = [(job, state) for job, state in jobs if state in WAITING_STATES]
    active = [job for job, state in jobs if state == ACTIVE]
    if not waiting and not active:
        return {}
    now_ms = now_ms or ops.now_ms()
    fleet = Fleet(conn, namespace)
    modules = tuple(handler_modules)
    found: dict[str, WaitingReason] = {}
    records: list[dict[str, Any]] | None = None
    if waiting:
        keys = QueueKeys(queue, prefix)
        groups = {
            job.id: gid
            for job, state in waiting
            if state in READY and (gid := job_group(job)) is not None
        }
        wanted = [
            (job.id, _read_as(job, state, groups), _priority(job))
            for job, state in waiting
        ]
        try:
            q, per_job = run_sync(facts_op(keys, fleet.keys, wanted, now_ms), conn)
            in_groups = run_sync(
                group_facts_op(keys, list(groups.items()), now_ms), conn
            )
        except redis.ResponseError as exc:
            why = f"Redis refused a read: {exc}"
            return {job.id: unknown(why) for job, _ in waiting}
        _add_workers(q, conn, fleet, keys, workers)
        records = q.gpu_all
        for (job, state), j in zip(waiting, per_job):
            try:
                need = j.declared_bytes
                if need is None and "data" not in job.left_out:
                    need = declared_need(job.name, job.data, modules)
                error = shown(job.failed_reason) if job.failed_reason else None
                g = in_groups.get(job.id)
                grouped = group_reasons(g, now_ms) if g is not None else None
                reason = explain_one(
                    job, state, q, j, need, prefix, now_ms, error, grouped
                )
            except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
                reason = unknown(f"unreadable job fields ({exc})")
            if reason is not None:
                found[job.id] = reason
        _add_loading_models(fleet, q, waiting, found, modules, now_ms)
    if active:
        if records is None:
            records = _records(fleet)
        _add_loading_jobs(fleet, records, prefix, queue, active, found, now_ms)
    return found


def _records(fleet: Fleet) -> list[dict[str, Any]]:
    try:
        return fleet.list_workers()
    except redis.ResponseError:
        return []


def _add_loading_jobs(
    fleet: Fleet,
    records: list[dict[str, Any]],
    prefix: str,
    queue: str,
    active: list[Job],
    found: dict[str, WaitingReason],
    now_ms: int,
) -> None:
    """`loading_model` for the active jobs a worker is loading the model of."""
    loads = loading_jobs(records, prefix, queue)
    mine = {job.id: loads[job.id] for job in active if job.id in loads}
    past = _past_loads(fleet, mine.values())
    for job_id, load in mine.items():
        found[job_id] = loading_reason(expected(load, past), now_ms)


def _add_loading_models(
    fleet: Fleet,
    q: QueueFacts,
    waiting: list[tuple[Job, str]],
    found: dict[str, WaitingReason],
    modules: tuple[str, ...],
    now_ms: int,
) -> None:
    """In `also`: a ready job's model loading on a GPU serving its queue."""
    loads = loading_models(q.gpu_serving)
    if not loads:
        return
    mine: dict[str, Loading] = {}
    for job, state in waiting:
        reason = found.get(job.id)
        if reason is None or state not in READY or "data" in job.left_out:
            continue
        name = job_model(job.name, job.data, modules)
        if name is not None and name in loads:
            mine[job.id] = loads[name]
    past = _past_loads(fleet, mine.values())
    for job_id, load in mine.items():
        also = loading_reason(expected(load, past), now_ms, waiting=True)
        found[job_id].also.append(also)


def _past_loads(fleet: Fleet, loads: Iterable[Loading]) -> dict[str, float]:
    try:
        return with_past_loads(fleet.client, fleet.keys, loads)
    except redis.ResponseError:
        return {}


def _read_as(job: Job, state: str, groups: dict[str, str]) -> str:
    """The state a job's own reads go by: a grouped job is in none of the
    lists BullMQ's states name (docs/groups.md)."""
    if job.id in groups:
        return GROUPED
    if state == "delayed" and job_group(job) is not None:
        return GROUPED_DELAYED
    return state


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
