"""Queue and job operations written once, without I/O.

Each operation is a generator that yields Redis requests (`Cmd`, `Eval`, or a
list of them to send as one pipeline) and receives their replies; the sync
and asyncio queues drive the same generators (see `queue.py`). A Redis error
reply is raised inside the generator at its `yield`, so an operation may
answer it (one not caught there reaches the caller unchanged).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Sequence
from typing import Any, NamedTuple, Union

from . import codec, defaults
from .exceptions import (
    JobLocked,
    JobNotFound,
    QueueHasActiveJobs,
    QueueNotPaused,
    raise_for_code,
)
from .keys import QueueKeys, names_queue_key
from .state import JobState, parse_state


class Cmd(NamedTuple):
    """A plain Redis command."""

    args: tuple[Any, ...]


class Eval(NamedTuple):
    """A call of one of the registered Lua scripts."""

    name: str
    keys: Sequence[str]
    args: Sequence[Any]


class Atomic(NamedTuple):
    """Requests sent as one MULTI/EXEC transaction (a flow insert)."""

    requests: list[Cmd | Eval]


Request = Union[Cmd, Eval, Atomic, list[Cmd | Eval]]
Op = Generator[Request, Any, Any]

#: Default states of get_counts / get_jobs, as Node's getJobCounts.
DEFAULT_STATES = (
    JobState.ACTIVE,
    JobState.COMPLETED,
    JobState.DELAYED,
    JobState.FAILED,
    JobState.PRIORITIZED,
    JobState.WAITING,
    JobState.WAITING_CHILDREN,
)
_LIST_STATES = (JobState.WAITING, JobState.ACTIVE, JobState.PAUSED)


def now_ms() -> int:
    """Wall-clock time in ms since the epoch."""
    return int(time.time() * 1000)


def add_call(
    keys: QueueKeys,
    name: str,
    data_json: str,
    opts: dict[str, Any],
    timestamp: int,
    extra: dict[str, Any] | None = None,
    waiting_children: bool = False,
) -> Eval:
    """The script call that stores one job (wire spec 4.1-4.4).

    `extra` adds script arguments: `id` (a flow node's id), `parentKey`,
    `parent` (JSON text) and `flow`; `waiting_children` adds a flow parent.
    """
    args: dict[str, Any] = {
        "name": name,
        "opts": codec.dumps(opts),
        "timestamp": str(timestamp),
        "delay": str(opts.get("delay", 0)),
        "priority": str(opts.get("priority", 0)),
    }
    if "jobId" in opts:
        args["id"] = opts["jobId"]
    if opts.get("lifo"):
        args["lifo"] = True
    de = opts.get("de")
    if de:
        args["de"] = de
        args["deid"] = de["id"]
    if extra:
        args.update(extra)
    packed = (keys.base, codec.dumps(args), data_json)
    if waiting_children:
        return Eval(
            "add_parent_job",
            (keys.meta, keys.id, keys.events, keys.waiting_children),
            packed,
        )
    if opts.get("delay", 0) > 0:
        return Eval(
            "add_delayed_job",
            (keys.delayed, keys.meta, keys.id, keys.events, keys.marker),
            packed,
        )
    if opts.get("priority"):
        return Eval(
            "add_prioritized_job",
            (
                keys.prioritized,
                keys.meta,
                keys.id,
                keys.events,
                keys.marker,
                keys.active,
                keys.pc,
            ),
            packed,
        )
    return Eval(
        "add_standard_job",
        (keys.wait, keys.meta, keys.id, keys.events, keys.marker, keys.active),
        packed,
    )


def state_keys(keys: QueueKeys) -> tuple[str, ...]:
    """The keys get_state searches, in its order."""
    return (
        keys.completed,
        keys.failed,
        keys.delayed,
        keys.prioritized,
        keys.active,
        keys.wait,
        keys.paused,
        keys.waiting_children,
    )


class JobRead(NamedTuple):
    """A job's hash and the state that held it at the same instant."""

    fields: dict[str, str]
    #: Fields over the cap, with their byte lengths.
    left_out: dict[str, int]
    state: JobState


_GONE = JobRead({}, {}, JobState.UNKNOWN)


def get_job_hashes(
    keys: QueueKeys,
    ids: Sequence[str],
    max_value_bytes: int | None = None,
    with_state: bool = False,
) -> Op:
    """A JobRead per id: the job's fields (without values longer than
    `max_value_bytes`, whose byte lengths `left_out` gives instead) and, with
    `with_state`, its state read in the same atomic step (else UNKNOWN). A
    gone job, or an id that names one of the queue's own keys, reads as an
    empty hash in state UNKNOWN."""
    wanted = [i for i in ids if not names_queue_key(i)]
    if not wanted:
        return [_GONE for _ in ids]
    cap = -1 if max_value_bytes is None else int(max_value_bytes)
    replies = yield Eval(
        "get_job_hashes",
        state_keys(keys) + tuple(keys.job(i) for i in wanted),
        (cap, "1" if with_state else "", *wanted),
    )
    found = {}
    for job_id, (flat, cut, state) in zip(wanted, replies):
        fields = dict(zip(flat[::2], flat[1::2]))
        left_out = {name: int(size) for name, size in zip(cut[::2], cut[1::2])}
        found[job_id] = JobRead(fields, left_out, JobState(state or "unknown"))
    return [found.get(i, _GONE) for i in ids]


def get_counts(keys: QueueKeys, states: Iterable[str | JobState]) -> Op:
    """Counts per state name (`waiting` includes a legacy `paused` list)."""
    wanted = [parse_state(s) for s in states] or list(DEFAULT_STATES)
    script_keys: list[str] = []
    names: list[str] = []
    for state in wanted:
        script_keys.append(keys.state(state))
        names.append(state.key_suffix)
        if state is JobState.WAITING:
            script_keys.append(keys.paused)
            names.append("paused")
    counts = yield Eval("get_counts", script_keys, names)
    result: dict[str, int] = {}
    i = 0
    for state in wanted:
        n = int(counts[i])
        i += 1
        if state is JobState.WAITING:
            n += int(counts[i])
            i += 1
        result[state.value] = n
    return result


def get_state(keys: QueueKeys, job_id: str) -> Op:
    """The state that holds a job (UNKNOWN for an id naming a queue key, even
    one another client listed)."""
    if names_queue_key(job_id):
        return JobState.UNKNOWN
    state = yield Eval("get_state", state_keys(keys), (job_id,))
    return JobState(state)


def page_ids(
    keys: QueueKeys, states: Sequence[str | JobState], start: int, end: int, asc: bool
) -> Op:
    """Ids of one page across states in order, reading O(page) entries.

    Lists are newest-first at the head (`asc` reads from the tail); sorted
    sets are oldest-first by score.
    """
    wanted = [parse_state(s) for s in states] or list(DEFAULT_STATES)
    sources: list[tuple[JobState, str]] = []
    for state in wanted:
        sources.append((state, keys.state(state)))
        if state is JobState.WAITING:
            sources.append((JobState.PAUSED, keys.paused))
    sizes = yield [
        Cmd(("LLEN" if st in _LIST_STATES else "ZCARD", key)) for st, key in sources
    ]
    total = sum(int(n) for n in sizes)
    if end < 0:
        end = total + end
    end = min(end, total - 1)
    if start < 0 or start > end:
        return []
    requests: list[Cmd | Eval] = []
    offset = 0
    for (state, key), size in zip(sources, sizes):
        size = int(size)
        lo, hi = max(start - offset, 0), min(end - offset, size - 1)
        offset += size
        if lo > hi:
            continue
        if state in _LIST_STATES:
            if asc:
                requests.append(Cmd(("LRANGE", key, -hi - 1, -lo - 1)))
            else:
                requests.append(Cmd(("LRANGE", key, lo, hi)))
        elif asc:
            requests.append(Cmd(("ZRANGE", key, lo, hi)))
        else:
            requests.append(Cmd(("ZREVRANGE", key, lo, hi)))
    if not requests:
        return []
    ranges = yield requests
    ids: list[str] = []
    for request, found in zip(requests, ranges):
        if request.args[0] == "LRANGE" and asc:
            found = list(reversed(found))
        ids.extend(i for i in found if not i.startswith("0:"))
    return ids


def pause(keys: QueueKeys, paused: bool) -> Op:
    """Pause, or resume and migrate a legacy `paused` list in chunks."""
    pause_keys = (
        keys.wait,
        keys.paused,
        keys.meta,
        keys.prioritized,
        keys.events,
        keys.delayed,
        keys.marker,
    )
    remaining = yield Eval(
        "pause", pause_keys, ("paused" if paused else "resumed", "1")
    )
    while int(remaining) > 0:
        remaining = yield Eval("pause", pause_keys, ("resumed", "0"))
    return None


def clean(keys: QueueKeys, grace_ms: int, limit: int, state: str | JobState) -> Op:
    """Remove jobs of a state older than `grace_ms`; returns the removed ids."""
    st = parse_state(state)
    key = keys.state(st)
    cutoff = now_ms() - grace_ms
    removed: list[str] = []
    while True:
        batch = (
            defaults.CLEAN_BATCH
            if not limit
            else min(limit - len(removed), defaults.CLEAN_BATCH)
        )
        ids = yield Eval(
            "clean_jobs_in_set",
            (key, keys.events, keys.repeat),
            (keys.base, cutoff, batch, st.key_suffix),
        )
        removed.extend(ids)
        if len(ids) < batch or (limit and len(removed) >= limit):
            return removed


def obliterate(keys: QueueKeys, force: bool) -> Op:
    """Pause the queue, then delete it and all its jobs in batches."""
    yield from pause(keys, True)
    while True:
        code = yield Eval(
            "obliterate",
            (keys.meta, keys.base),
            (defaults.OBLITERATE_BATCH, "force" if force else ""),
        )
        if code == -1:
            raise QueueNotPaused(f"queue {keys.name} must be paused to obliterate it")
        if code == -2:
            raise QueueHasActiveJobs(
                f"queue {keys.name} has active jobs; pass force=True to obliterate it"
            )
        if code == 0:
            return None


def move_jobs_to_wait(keys: QueueKeys, state: str, count: int, max_score: Any) -> Op:
    """Bulk retry (finished states) or promote (delayed), batch after batch."""
    st = parse_state(state)
    while True:
        more = yield Eval(
            "move_jobs_to_wait",
            (
                keys.events,
                keys.state(st),
                keys.wait,
                keys.meta,
                keys.marker,
                keys.active,
            ),
            (keys.base, count, max_score, st.value),
        )
        if not int(more):
            return None


def remove(keys: QueueKeys, job_id: str, remove_children: bool = True) -> Op:
    """Remove a job from any state (with its children unless told otherwise);
    False when it did not exist."""
    if names_queue_key(job_id):  # never a job: its "hash" is a queue key
        return False
    code = yield Eval(
        "remove_job",
        (keys.job(job_id), keys.events, keys.meta),
        (keys.base, job_id, now_ms(), "1" if remove_children else "0"),
    )
    if code == 0:
        raise JobLocked(
            f"job {job_id} or one of its pending children is locked by a worker"
            " and cannot be removed"
        )
    if code == -1:
        return False
    raise_for_code(code, job_id)
    return True


def dependencies(keys: QueueKeys, job_id: str) -> Op:
    """A parent's children by outcome: processed {key: returnvalue},
    unprocessed [key], failed [key] (fpof), ignored {key: failedReason}."""
    processed, pending, failed, ignored = yield [
        Cmd(("HGETALL", keys.processed(job_id))),
        Cmd(("SMEMBERS", keys.dependencies(job_id))),
        Cmd(("ZRANGE", keys.unsuccessful(job_id), 0, -1)),
        Cmd(("HGETALL", keys.failed_children(job_id))),
    ]
    return {
        "processed": {k: codec.json_or_text(v) for k, v in processed.items()},
        "unprocessed": sorted(pending),
        "failed": list(failed),
        "ignored": dict(ignored),
    }


def children_values(keys: QueueKeys, job_id: str) -> Op:
    """{child job key: return value} of a parent's completed children."""
    processed = yield Cmd(("HGETALL", keys.processed(job_id)))
    return {k: codec.json_or_text(v) for k, v in processed.items()}


def job_op(keys: QueueKeys, kind: str, job_id: str, *a: Any) -> Op:
    """Single-job transitions used by `Job` methods."""
    if names_queue_key(job_id):
        raise JobNotFound(f"{job_id!r} names one of the queue's keys, not a job")
    if kind == "update_progress":
        code = yield Eval(
            "update_progress",
            (keys.job(job_id), keys.events, keys.meta),
            (job_id, codec.dumps(a[0])),
        )
    elif kind == "add_log":
        keep = "" if a[1] is None else str(a[1])
        code = yield Eval(
            "add_log", (keys.job(job_id), keys.logs(job_id)), (a[0], keep)
        )
    elif kind == "update_data":
        code = yield Eval("update_data", (keys.job(job_id),), (codec.dumps(a[0]),))
    elif kind == "change_priority":
        priority, lifo = a
        code = yield Eval(
            "change_priority",
            (
                keys.wait,
                keys.prioritized,
                keys.meta,
                keys.marker,
                keys.pc,
                keys.active,
                keys.job(job_id),
            ),
            (int(priority), job_id, "1" if lifo else "0"),
        )
    elif kind == "promote":
        code = yield Eval(
            "promote",
            (
                keys.delayed,
                keys.wait,
                keys.prioritized,
                keys.events,
                keys.meta,
                keys.pc,
                keys.marker,
                keys.active,
            ),
            (keys.base, job_id),
        )
        raise_for_code(code, job_id, "delayed")
    elif kind == "reprocess":
        state, lifo, reset_atm, reset_ats = a
        st = parse_state(state)
        code = yield Eval(
            "reprocess_job",
            (
                keys.job(job_id),
                keys.events,
                keys.state(st),
                keys.wait,
                keys.meta,
                keys.marker,
                keys.active,
                keys.prioritized,
                keys.pc,
            ),
            (
                job_id,
                "1" if lifo else "0",
                "failedReason" if st is JobState.FAILED else "returnvalue",
                st.value,
                "1" if reset_atm else "0",
                "1" if reset_ats else "0",
            ),
        )
        raise_for_code(code, job_id, st.value)
    else:  # pragma: no cover - programming error
        raise ValueError(kind)
    raise_for_code(code, job_id)
    return code
