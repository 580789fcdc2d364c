"""Reading a queue and its jobs: counts, states, pages of ids, job hashes,
a parent's children, and how long the next waiting job has waited."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from .. import codec
from ..keys import QueueKeys, names_queue_key
from ..state import LIST_STATES, JobState, parse_state
from .requests import Cmd, Eval, Op

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


def job_fields(keys: QueueKeys, job_id: str, fields: Sequence[str]) -> Eval:
    """The request reading `fields` of one job (a list of values, None where
    absent) for a pipeline: a member of a set that names no job hash (`id`,
    `1:logs`, written by another client) reads as a gone job, never as the
    WRONGTYPE that would fail every read of the pipeline."""
    return Eval("get_job_fields", (keys.job(job_id),), tuple(fields))


def get_job_hashes(
    keys: QueueKeys,
    ids: Sequence[str],
    max_value_bytes: int | None = None,
    with_state: bool = False,
) -> Op[list[JobRead]]:
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


def get_counts(keys: QueueKeys, states: Iterable[str | JobState]) -> Op[dict[str, int]]:
    """Counts per state name (`waiting` includes a legacy `paused` list and
    the grouped jobs waiting in their groups; `delayed` the grouped delayed)."""
    wanted = [parse_state(s) for s in states] or list(DEFAULT_STATES)
    script_keys: list[str] = []
    names: list[str] = []
    for state in wanted:
        script_keys.append(keys.state(state))
        names.append(state.key_suffix)
        if state is JobState.WAITING:
            # BullMQ 5's `paused` list, and the grouped jobs (docs/groups.md).
            script_keys += [keys.paused, keys.base + "groups:meta"]
            names += ["paused", "grouped"]
        elif state is JobState.DELAYED:
            script_keys.append(keys.base + "groups:delayed")
            names.append("delayed")
    counts = yield Eval("get_counts", script_keys, names)
    result: dict[str, int] = {}
    i = 0
    for state in wanted:
        extra = {JobState.WAITING: 2, JobState.DELAYED: 1}.get(state, 0)
        result[state.value] = sum(int(c) for c in counts[i : i + 1 + extra])
        i += 1 + extra
    return result


def get_state(keys: QueueKeys, job_id: str) -> Op[JobState]:
    """The state that holds a job (UNKNOWN for an id naming a queue key, even
    one another client listed)."""
    if names_queue_key(job_id):
        return JobState.UNKNOWN
    state = yield Eval("get_state", state_keys(keys), (job_id,))
    return JobState(state)


def page_ids(
    keys: QueueKeys, states: Sequence[str | JobState], start: int, end: int, asc: bool
) -> Op[list[str]]:
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
        Cmd(("LLEN" if st in LIST_STATES else "ZCARD", key)) for st, key in sources
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
        if state in LIST_STATES:
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


def get_logs(
    keys: QueueKeys, job_id: str, start: int, end: int, asc: bool
) -> Op[tuple[list[str], int]]:
    """(lines, total count) of a job's log, oldest first unless not `asc`."""
    key = keys.logs(job_id)
    if asc:
        lines, count = yield [Cmd(("LRANGE", key, start, end)), Cmd(("LLEN", key))]
    else:
        lines, count = yield [
            Cmd(("LRANGE", key, -end - 1, -start - 1)),
            Cmd(("LLEN", key)),
        ]
        lines = list(reversed(lines))
    return lines, int(count)


def dependencies(keys: QueueKeys, job_id: str) -> Op[dict[str, Any]]:
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


def children_values(keys: QueueKeys, job_id: str) -> Op[dict[str, Any]]:
    """{child job key: return value} of a parent's completed children."""
    processed = yield Cmd(("HGETALL", keys.processed(job_id)))
    return {k: codec.json_or_text(v) for k, v in processed.items()}


def oldest_waiting(keys: QueueKeys) -> Op[int | None]:
    """When the job next in line has been waiting since (ms since the epoch:
    its timestamp plus its delay), or None when nothing waits. Reads the
    tails of `wait` and of a legacy `paused` list and the head of
    `prioritized` (the jobs taken next), O(1): the oldest of those."""
    wait_tail, paused_tail, first_prioritized = yield [
        Cmd(("LRANGE", keys.wait, -1, -1)),
        Cmd(("LRANGE", keys.paused, -1, -1)),
        Cmd(("ZRANGE", keys.prioritized, 0, 0)),
    ]
    listed = [i for i in (*wait_tail, *paused_tail) if not i.startswith("0:")][:1]
    ids = listed + list(first_prioritized)
    if not ids:
        return None
    fields = yield [job_fields(keys, i, ("timestamp", "delay")) for i in ids]
    since = []
    for stamp, delay in fields:
        ready = codec.to_int(stamp)
        if ready is not None:  # else removed meanwhile
            since.append(ready + (codec.to_int(delay, 0) or 0))
    return min(since) if since else None
