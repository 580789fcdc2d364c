"""One queue's reads: its counts per state, the queue page's header, a page
of its jobs (with their states), and the oldest waiting job."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from queues import Job, JobState, codec, ops
from queues.drive import cmd, cmds, gather
from queues.keys import QueueKeys
from queues.ops import DEFAULT_STATES

from .. import conf
from ..redis import queue
from . import run
from .discovery import QueueRef


def queue_counts(refs: Sequence[QueueRef], *states: str) -> list[dict[str, int]]:
    """Counts per state of several queues in one round trip."""
    counts: list[dict[str, int]] = run(
        gather(
            [
                ops.get_counts(QueueKeys(r.name, r.prefix), states or DEFAULT_STATES)
                for r in refs
            ]
        )
    )
    return counts


def oldest_waiting_op(keys: QueueKeys) -> ops.Op:
    """When the job that has waited longest became due (epoch ms: its
    timestamp plus delay), or None: the tail of `wait` (or of `paused`) that
    is not a marker, in two steps (the overview and /metrics gather it)."""
    tails = yield from cmds(
        [("LRANGE", keys.wait, -1, -1), ("LRANGE", keys.paused, -1, -1)]
    )
    tail = [i for found in tails for i in found if not i.startswith("0:")]
    if not tail:
        return None
    stamp, delay = yield ops.Cmd(("HMGET", keys.job(tail[0]), "timestamp", "delay"))
    added = codec.to_int(stamp)
    if added is None:
        return None
    return added + (codec.to_int(delay) or 0)


# --- the queue page ----------------------------------------------------------
@dataclass
class QueueHeader:
    """Counts, paused flag and global limits of one queue."""

    counts: dict[str, int]
    paused: bool
    concurrency: int | None
    rate_max: int | None
    rate_duration_ms: int | None


def queue_header(ref: QueueRef) -> QueueHeader:
    """What the queue page shows above its job list (one round trip)."""
    keys = QueueKeys(ref.name, ref.prefix)
    counts, meta = run(
        gather([ops.get_counts(keys, DEFAULT_STATES), cmd("HGETALL", keys.meta)])
    )
    meta = meta or {}

    def num(name: str) -> int | None:
        value = meta.get(name)
        return int(value) if value and value.lstrip("-").isdigit() else None

    return QueueHeader(
        counts, "paused" in meta, num("concurrency"), num("max"), num("duration")
    )


def page(
    ref: QueueRef, states: Sequence[str], start: int, end: int, asc: bool
) -> list[Job]:
    """One page of jobs across states, O(page) in Redis; values over
    BULLPEN_LIST_VALUE_MAX_BYTES are left out (Job.left_out)."""
    jobs: list[Job] = queue(ref.prefix, ref.name).get_jobs(
        list(states),
        start,
        end,
        asc,
        max_value_bytes=conf.get().list_value_max_bytes,
    )
    return jobs


def page_with_states(
    ref: QueueRef, states: Sequence[str], start: int, end: int, asc: bool
) -> list[tuple[Job, str]]:
    """`page` with each job's state, read in the same atomic step as its
    fields (a row never says "completed" beside the fields of before). One
    state's rows do not show it: they are that page, without the state read
    (an LPOS over `wait` per waiting job)."""
    if len(states) == 1:
        return [(job, states[0]) for job in page(ref, states, start, end, asc)]
    pairs: list[tuple[Job, JobState]] = queue(
        ref.prefix, ref.name
    ).get_jobs_with_states(
        list(states),
        start,
        end,
        asc,
        max_value_bytes=conf.get().list_value_max_bytes,
    )
    return [(job, state.value) for job, state in pairs]
