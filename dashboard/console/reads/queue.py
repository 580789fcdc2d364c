"""One queue's reads: its counts per state, the queue page's header, a page
of its jobs (with their states), and the oldest waiting job."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef
from dashboard.shared.redis import queue
from queues import Job, JobState, ops
from queues.drive import cmd, gather
from queues.keys import QueueKeys
from queues.ops import DEFAULT_STATES

from . import run


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
    the list value cap (`conf.list_value_max_bytes`) are left out (Job.left_out)."""
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
