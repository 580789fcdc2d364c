"""The Redis reads behind waiting reasons: a queue's facts (once per list)
and each job's own facts, sent together as one pipeline whatever the queue's
length; the fleet's heartbeats and the CLIENT LIST census come beside them.

The pipeline is not a transaction, though a job's place in line is read
with several commands: `queues.drive` sends a MULTI/EXEC as a request of its
own, so the place's commands alone in one would cost a round trip more, and
the whole batch in one cannot run on a Redis Cluster, where it spans slots
(the queue's keys, Bullpen's job records). place.py clamps what a list that
moved between two commands may answer.

Every reply is parsed leniently: a field another client wrote oddly reads as
None (unknown), never as an exception.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from queues import ops
from queues.clients import census_of, client_lists, connection_name
from queues.drive import run_sync
from queues.keys import QueueKeys
from queues.ops import Cmd, Eval

from .. import defaults
from ..keys import BullpenKeys
from .place import Place, prioritized_place, wait_place

MINUTE_MS = 60_000
#: A prioritized score is priority times this, plus a counter (BullMQ).
PRIORITY_SCORE = 1 << 32
#: GPU worker states that take no new job.
NOT_TAKING = frozenset({"failed", "draining"})
#: A delayed score is the due time in ms times this, plus a counter.
DELAYED_SCORE_PER_MS = 4096
#: The state a grouped delayed job's reads go by: it waits in `groups:delayed`
#: (docs/groups.md), scored by its due time in ms.
GROUPED_DELAYED = "grouped-delayed"


def as_int(value: Any) -> int | None:
    """An integer reply or field, or None when absent or unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass
class QueueFacts:
    """What a queue's state says for every job of it (read once per list)."""

    paused: bool
    concurrency: int | None
    active: int | None
    rate_max: int | None
    limiter_count: int | None
    limiter_pttl_ms: int | None
    waiting: int | None
    prioritized: int | None
    #: Finished (completed + failed) jobs per minute over the window.
    finished_per_min: float | None
    #: Connected BullMQ workers (CLIENT LIST names), None when refused.
    connected: int | None = None
    #: Live GPU worker records (heartbeats) serving this queue.
    gpu_serving: list[dict[str, Any]] = field(default_factory=list)
    #: Every live GPU worker record (for "which GPU would fit it").
    gpu_all: list[dict[str, Any]] = field(default_factory=list)

    @property
    def live_workers(self) -> int:
        """Workers that could take a job now: connected, or GPU workers with
        a fresh heartbeat that are neither failed nor draining."""
        taking = [r for r in self.gpu_serving if r.get("state") not in NOT_TAKING]
        return max(self.connected or 0, len(taking))


@dataclass
class JobFacts:
    """What a job's own keys say: due time, place in line, children, VRAM."""

    due_ms: int | None = None
    #: Jobs ahead of it (exact or a range), None when it left its list.
    place: Place | None = None
    prio_before_own: int | None = None
    pending_children: int | None = None
    children_sample: list[str] = field(default_factory=list)
    done_children: int | None = None
    failed_children: int | None = None
    declared_bytes: int | None = None


def _queue_cmds(keys: QueueKeys, now_ms: int, window_min: int) -> list[Cmd]:
    since = now_ms - window_min * MINUTE_MS
    cmds = [
        Cmd(("HMGET", keys.meta, "paused", "concurrency", "max")),
        Cmd(("LLEN", keys.active)),
        Cmd(("GET", keys.limiter)),
        Cmd(("PTTL", keys.limiter)),
        Cmd(("LLEN", keys.wait)),
        Cmd(("ZCARD", keys.prioritized)),
        Cmd(("ZCOUNT", keys.completed, since, "+inf")),
        Cmd(("ZCOUNT", keys.failed, since, "+inf")),
    ]
    for target in ("completed", "failed"):
        fields = ("count", "prevTS", "prevCount")
        cmds.append(Cmd(("HMGET", keys.metrics(target), *fields)))
        cmds.append(Cmd(("LRANGE", keys.metrics_data(target), 0, window_min)))
    return cmds


def _metrics_count(meta: Any, data: Any, now_ms: int, window_min: int) -> int:
    """Jobs BullMQ's per-minute metrics count in the window (they count jobs
    that retention already deleted): the open minute and those before it."""
    if not isinstance(meta, list) or len(meta) != 3:
        return 0
    count, prev_ts, prev_count = (as_int(v) for v in meta)
    if count is None or prev_ts is None:
        return 0
    back = max(now_ms - prev_ts, 0) // MINUTE_MS
    if back >= window_min:
        return 0
    total = count - (prev_count or 0)
    for value in (data if isinstance(data, list) else [])[: window_min - 1 - back]:
        total += as_int(value) or 0
    return max(total, 0)


def _queue_facts(replies: list[Any], now_ms: int, window_min: int) -> QueueFacts:
    meta, active, limiter, pttl, wait, prio, done, failed = replies[:8]
    c_meta, c_data, f_meta, f_data = replies[8:12]
    meta = meta if isinstance(meta, list) and len(meta) == 3 else [None] * 3
    kept = (as_int(done) or 0) + (as_int(failed) or 0)
    counted = _metrics_count(c_meta, c_data, now_ms, window_min) + _metrics_count(
        f_meta, f_data, now_ms, window_min
    )
    ttl = as_int(pttl)
    return QueueFacts(
        paused=meta[0] is not None,
        concurrency=as_int(meta[1]),
        active=as_int(active),
        rate_max=as_int(meta[2]),
        limiter_count=as_int(limiter),
        limiter_pttl_ms=ttl if ttl is not None and ttl > 0 else None,
        waiting=as_int(wait),
        prioritized=as_int(prio),
        finished_per_min=max(kept, counted) / window_min,
    )


def _job_cmds(
    keys: QueueKeys, bkeys: BullpenKeys, job_id: str, state: str, priority: int
) -> list[Cmd]:
    record = bkeys.job(keys.prefix, keys.name, job_id)
    cmds = [Cmd(("HGET", record, "declared_bytes"))]
    if state == "delayed":
        cmds.append(Cmd(("ZSCORE", keys.delayed, job_id)))
    elif state == GROUPED_DELAYED:  # scored by its due time in ms
        cmds.append(Cmd(("ZSCORE", keys.groups_delayed, job_id)))
    elif state == "waiting":  # a grouped job's state is `grouped` here: no scans
        # Its own LLEN right before the scans (place.py): the queue's, read at
        # the head of a long pipeline, may be further from them in time.
        scan = defaults.WAITING_POSITION_SCAN
        cmds.append(Cmd(("LLEN", keys.wait)))
        cmds.append(Cmd(("LPOS", keys.wait, job_id, "RANK", -1, "MAXLEN", scan)))
        cmds.append(Cmd(("LPOS", keys.wait, job_id, "RANK", 1, "MAXLEN", scan)))
    elif state == "prioritized":
        cmds.append(Cmd(("ZRANK", keys.prioritized, job_id)))
        own = max(priority, 0) * PRIORITY_SCORE
        cmds.append(Cmd(("ZCOUNT", keys.prioritized, "-inf", f"({own}")))
    elif state == "waiting-children":
        shown = defaults.WAITING_CHILDREN_SHOWN
        cmds.append(Cmd(("SCARD", keys.dependencies(job_id))))
        cmds.append(Cmd(("SRANDMEMBER", keys.dependencies(job_id), shown)))
        cmds.append(Cmd(("HLEN", keys.processed(job_id))))
        cmds.append(Cmd(("HLEN", keys.failed_children(job_id))))
        cmds.append(Cmd(("ZCARD", keys.unsuccessful(job_id))))
    return cmds


def _job_facts(state: str, replies: list[Any], wait_len: int | None) -> JobFacts:
    facts = JobFacts(declared_bytes=as_int(replies[0]))
    rest = replies[1:]
    if state == "delayed":
        score = as_int(rest[0])
        facts.due_ms = None if score is None else score // DELAYED_SCORE_PER_MS
    elif state == GROUPED_DELAYED:
        facts.due_ms = as_int(rest[0])
    elif state == "waiting":
        length, front, back = (as_int(v) for v in rest[:3])
        scan = defaults.WAITING_POSITION_SCAN
        facts.place = wait_place(length, front, back, scan)
    elif state == "prioritized":
        rank, before = as_int(rest[0]), as_int(rest[1])
        facts.place = prioritized_place(wait_len, rank)
        if rank is not None and before is not None:
            facts.prio_before_own = max(rank - before, 0)
    elif state == "waiting-children":
        facts.pending_children = as_int(rest[0])
        sample = rest[1] if isinstance(rest[1], list) else []
        facts.children_sample = sorted(str(k) for k in sample)
        done, failed, unsuccessful = (as_int(v) for v in rest[2:5])
        facts.done_children = done
        facts.failed_children = (failed or 0) + (unsuccessful or 0)
    return facts


def facts_op(
    keys: QueueKeys,
    bkeys: BullpenKeys,
    jobs: Sequence[tuple[str, str, int]],
    now_ms: int,
) -> ops.Op[tuple[QueueFacts, list[JobFacts]]]:
    """The queue's facts and each job's (id, state, priority) facts, in one
    pipelined round trip."""
    window = defaults.WAITING_THROUGHPUT_WINDOW_MIN
    queue_cmds = _queue_cmds(keys, now_ms, window)
    per_job = [_job_cmds(keys, bkeys, *job) for job in jobs]
    batch: list[Cmd | Eval] = [*queue_cmds, *(c for cmds in per_job for c in cmds)]
    replies = yield batch
    queue = _queue_facts(replies[: len(queue_cmds)], now_ms, window)
    found = []
    at = len(queue_cmds)
    for (_, state, _), cmds in zip(jobs, per_job):
        found.append(_job_facts(state, replies[at : at + len(cmds)], queue.waiting))
        at += len(cmds)
    return queue, found


def census(conn: Any) -> Counter[str] | None:
    """Connected BullMQ workers per `prefix:base64(name)` (one CLIENT LIST per
    primary); None when the server refuses CLIENT LIST (workers unknown)."""
    nodes = run_sync(client_lists(), conn)
    return census_of(nodes) if nodes else None


def connected_workers(census: Counter[str] | None, keys: QueueKeys) -> int | None:
    """A queue's connected workers in a census, None without one."""
    if census is None:
        return None
    return census.get(connection_name(keys.prefix, keys.name), 0)
