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
    the grouped jobs waiting in their groups, by their tickets in `groups:q`
    and the parked count; `delayed` the grouped delayed)."""
    wanted = [parse_state(s) for s in states] or list(DEFAULT_STATES)
    script_keys: list[str] = []
    names: list[str] = []
    for state in wanted:
        script_keys.append(keys.state(state))
        names.append(state.key_suffix)
        if state is JobState.WAITING:
            # BullMQ 5's `paused` list, and the grouped jobs (docs/groups.md).
            script_keys += [keys.paused, keys.groups_q, keys.groups_meta]
            names += ["paused", "groups:q", "pk"]
        elif state is JobState.DELAYED:
            script_keys.append(keys.groups_delayed)
            names.append("groups:delayed")
    counts = yield Eval("get_counts", script_keys, names)
    result: dict[str, int] = {}
    i = 0
    for state in wanted:
        extra = {JobState.WAITING: 3, JobState.DELAYED: 1}.get(state, 0)
        result[state.value] = sum(int(c) for c in counts[i : i + 1 + extra])
        i += 1 + extra
    return result


def grouped_waiting(keys: QueueKeys) -> Eval:
    """How many grouped jobs wait (docs/groups.md), O(1): the reply is
    [tickets in `groups:q`, tickets parked in their groups], to add up."""
    return Eval("get_counts", (keys.groups_q, keys.groups_meta), ("groups:q", "pk"))


def get_state(keys: QueueKeys, job_id: str) -> Op[JobState]:
    """The state that holds a job (UNKNOWN for an id naming a queue key, even
    one another client listed)."""
    if names_queue_key(job_id):
        return JobState.UNKNOWN
    state = yield Eval("get_state", state_keys(keys), (job_id,))
    return JobState(state)


#: What a `page_ids` source holds: a list of ids, a zset of ids, or a zset
#: of groups' tickets (`gid:KEY16:jobId`, docs/groups.md).
_LIST, _ZSET, _TICKETS = "list", "zset", "tickets"


def ticket_job(member: str) -> str:
    """The job id a group's ticket names (`gid:KEY16:jobId`)."""
    return member.split(":", 2)[-1]


def page_ids(
    keys: QueueKeys, states: Sequence[str | JobState], start: int, end: int, asc: bool
) -> Op[list[str]]:
    """Ids of one page across states in order, reading O(page) entries.

    Lists are newest-first at the head (`asc` reads from the tail); sorted
    sets are oldest-first by score. Waiting includes the grouped jobs after
    the ungrouped: those with a turn in `groups:q` in turn order, then the
    parked ones group by group (their groups are read only when the page
    reaches them); delayed includes `groups:delayed`.
    """
    wanted = [parse_state(s) for s in states] or list(DEFAULT_STATES)
    # (kind, key); grouped jobs (docs/groups.md) after the state's own.
    sources: list[tuple[str, str]] = []
    parked_at: int | None = None  # where the parked tickets go in `sources`
    for state in wanted:
        sources.append((_LIST if state in LIST_STATES else _ZSET, keys.state(state)))
        if state is JobState.WAITING:
            sources += [(_LIST, keys.paused), (_TICKETS, keys.groups_q)]
            parked_at = len(sources)
        elif state is JobState.DELAYED:
            sources.append((_ZSET, keys.groups_delayed))
    asks: list[Cmd | Eval] = [
        Cmd(("LLEN" if k == _LIST else "ZCARD", key)) for k, key in sources
    ]
    if parked_at is not None:
        asks.append(Cmd(("HGET", keys.groups_meta, "pk")))
    reply = yield asks
    sizes = [int(n) for n in reply[: len(sources)]]
    parked = 0
    if parked_at is not None:
        parked = codec.to_int(reply[-1], 0) or 0
    if parked and parked_at is not None and not 0 <= end < sum(sizes[:parked_at]):
        # The page may reach the parked tickets: their groups' zsets, in order.
        gids = sorted((yield Cmd(("SMEMBERS", keys.groups_parked))))
        groups = [(_TICKETS, keys.group(g) + ":parked") for g in gids]
        counts = yield [Cmd(("ZCARD", key)) for _, key in groups]
        sources[parked_at:parked_at] = groups
        sizes[parked_at:parked_at] = [int(n) for n in counts]
    total = sum(sizes)
    if end < 0:
        end = total + end
    end = min(end, total - 1)
    if start < 0 or start > end:
        return []
    requests: list[Cmd | Eval] = []
    kinds: list[str] = []
    offset = 0
    for (kind, key), size in zip(sources, sizes):
        lo, hi = max(start - offset, 0), min(end - offset, size - 1)
        offset += size
        if lo > hi:
            continue
        kinds.append(kind)
        if kind == _LIST:
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
    for kind, found in zip(kinds, ranges):
        if kind == _LIST and asc:
            found = list(reversed(found))
        elif kind == _TICKETS:
            found = [ticket_job(m) for m in found]
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
    tails of `wait` and of a legacy `paused` list, the head of
    `prioritized` and the grouped job with the next turn (the jobs taken
    next; a parked job's group cannot run), O(1): the oldest of those."""
    wait_tail, paused_tail, first_prioritized, first_ticket = yield [
        Cmd(("LRANGE", keys.wait, -1, -1)),
        Cmd(("LRANGE", keys.paused, -1, -1)),
        Cmd(("ZRANGE", keys.prioritized, 0, 0)),
        Cmd(("ZRANGE", keys.groups_q, 0, 0)),
    ]
    listed = [i for i in (*wait_tail, *paused_tail) if not i.startswith("0:")][:1]
    ids = listed + list(first_prioritized) + [ticket_job(t) for t in first_ticket]
    if not ids:
        return None
    fields = yield [job_fields(keys, i, ("timestamp", "delay")) for i in ids]
    since = []
    for stamp, delay in fields:
        ready = codec.to_int(stamp)
        if ready is not None:  # else removed meanwhile
            since.append(ready + (codec.to_int(delay, 0) or 0))
    return min(since) if since else None
