"""Groups: fair turns between customers sharing one queue (docs/groups.md).

A grouped job waits with a ticket, a turn of its group, in the queue's
turn-ordered `groups:q`; workers take the tickets in order
(`lua/includes/groups.lua`). This module holds the operations over a
queue's group keys and `GroupMethods`, the group API of `Queue` and
`AsyncQueue`; the group id rule, the settings and the read types are in
queues/group_types.py.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from . import codec
from .driver import Driver, op_method
from .exceptions import InvalidJobOptions
from .group_types import (
    SETTING_FIELDS,
    UNSET,
    GroupInfo,
    GroupSearch,
    GroupSettings,
    GroupSummary,
    _limit,
    settings_args,
    validate_group_id,
)
from .job import Job
from .keys import QueueKeys
from .ops import Cmd, Eval, Op, get_job_hashes, grouped_waiting, now_ms
from .reads import MakesJobs

Q = TypeVar("Q", bound=Driver)


#: How many ids of `active` a read of groups looks at to count the running
#: jobs of groups that keep no count (those under no limit).
RUNNING_SCAN = 10_000
#: A search of groups by part of their id: ZSCAN calls of the index (each
#: about SEARCH_PAGE entries) before it answers with what it found so far.
SEARCH_PAGE = 1_000
SEARCH_CALLS = 100


def _hold_info(text: str | None) -> dict[str, Any]:
    try:
        info = json.loads(text or "{}")
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def _group_reads(keys: QueueKeys, group: str) -> list[Cmd]:
    key = keys.group(group)
    return [
        Cmd(("HGETALL", key)),
        Cmd(("PTTL", key + ":limiter")),
        Cmd(("GET", key + ":limiter")),
        Cmd(("ZSCORE", keys.groups_timed, group)),
    ]


def group_counts(keys: QueueKeys, groups: list[str], scan: int = RUNNING_SCAN) -> Eval:
    """group_reads.lua's counts of each group: waiting, running, in the
    queue of tickets, tickets ahead of its first. `scan`: how many ids of
    `active` to look at for the running jobs of groups that keep no count
    (0: a caller that does not use `running`)."""
    return Eval(
        "group_reads",
        (keys.groups_meta,),
        (keys.base, "groups", str(scan), *groups),
    )


def unlisted_groups(keys: QueueKeys, scan: int = RUNNING_SCAN) -> Eval:
    """group_reads.lua's groups the index forgot while their jobs run (those
    in the first `scan` ids of `active`), sorted: still the queue's groups."""
    return Eval("group_reads", (keys.groups_meta,), (keys.base, "unlisted", str(scan)))


def _info(
    group: str,
    replies: list[Any],
    counts: list[Any],
    defaults: Mapping[str, str],
    now: int,
) -> GroupInfo:
    h, pttl, started, timed = replies
    waiting, running, in_queue, _ahead = (int(c) for c in counts)
    own = GroupSettings.from_hash(h)
    eff = GroupSettings.from_hash({**defaults, **{k: v for k, v in h.items()}})
    rate_max = _limit(eff.rate_max)
    limited = None
    if rate_max and pttl and pttl > 0 and (codec.to_int(started) or 0) >= rate_max:
        limited = now + int(pttl)
    elif timed is not None and float(timed) > now:
        limited = int(float(timed))
    hold_until = codec.to_int(h.get("holdUntil"))
    hold = h.get("hold") or None
    if hold and hold_until is not None and hold_until <= now:
        hold = hold_until = None
    return GroupInfo(
        id=group,
        waiting=waiting,
        active=max(running, 0),
        weight=_limit(eff.weight) or 1,
        concurrency=_limit(eff.concurrency),
        rate_max=rate_max,
        rate_duration_ms=(_limit(eff.rate_duration_ms) or 1000) if rate_max else None,
        paused=h.get("paused") == "1",
        hold=hold,
        hold_until_ms=hold_until if hold else None,
        hold_info=_hold_info(h.get("holdInfo")) if hold else {},
        limited_until_ms=limited,
        in_rotation=in_queue > 0,
        own=own,
    )


def admin(keys: QueueKeys, action: str, group: str, args: Mapping[str, Any]) -> Op[int]:
    """Run one group_admin.lua action; its reply."""
    if action != "defaults":
        validate_group_id(group)
    reply = yield Eval(
        "group_admin",
        (keys.groups_meta,),  # routes the call to the queue's slot
        (keys.base, action, group, codec.dumps(dict(args))),
    )
    while int(reply) == 2:  # a weight's re-turn goes on, a chunk a call
        reply = yield Eval(
            "group_admin", (keys.groups_meta,), (keys.base, "retag", "", "{}")
        )
    return int(reply)


def read_groups(keys: QueueKeys, groups: list[str], now: int) -> Op[list[GroupInfo]]:
    """GroupInfo of each id that names a known group, in order (one pipeline)."""
    batch: list[Cmd | Eval] = [
        Cmd(("HGETALL", keys.groups_meta)),
        group_counts(keys, groups),
    ]
    for g in groups:
        batch += _group_reads(keys, g)
        batch.append(Cmd(("ZSCORE", keys.groups_index, g)))
    replies = yield batch
    defaults = {k: v for k, v in replies[0].items() if k in SETTING_FIELDS.values()}
    counts = replies[1] if groups else []
    out = []
    for i, g in enumerate(groups):
        part = replies[2 + i * 5 : 7 + i * 5]
        waiting, running = int(counts[i][0]), int(counts[i][1])
        if part[4] is None and not part[0] and not waiting and not running:
            continue  # unknown, or forgotten and idle
        out.append(_info(g, part[:4], counts[i], defaults, now))
    return out


def page_groups(keys: QueueKeys, start: int, end: int, now: int) -> Op[list[GroupInfo]]:
    """A page of the queue's groups, largest backlog first: those the index
    lists, then those it forgot while their jobs run (unlisted_groups, only
    looked for when the index runs out on this page)."""
    if start < 0 or 0 <= end < start:
        return []
    listed, known = yield [
        Cmd(("ZREVRANGE", keys.groups_index, start, end)),
        Cmd(("ZCARD", keys.groups_index)),
    ]
    unlisted = []
    if end < 0 or start + len(listed) <= end:
        unlisted = yield unlisted_groups(keys)
    return (yield from _page(keys, start, end, now, listed, int(known), unlisted))


def page_and_count(
    keys: QueueKeys, start: int, end: int, now: int
) -> Op[tuple[list[GroupInfo], int]]:
    """page_groups and count_groups with one look at `active` (a page of
    every group with its total, as the pages, the API and the CLI show it)."""
    listed, known, unlisted = yield [
        Cmd(("ZREVRANGE", keys.groups_index, max(start, 0), end)),
        Cmd(("ZCARD", keys.groups_index)),
        unlisted_groups(keys),
    ]
    total = int(known) + len(unlisted)
    if start < 0 or 0 <= end < start:
        return [], total
    return (
        yield from _page(keys, start, end, now, listed, int(known), unlisted)
    ), total


def _page(
    keys: QueueKeys,
    start: int,
    end: int,
    now: int,
    listed: list[str],
    known: int,
    unlisted: list[str],
) -> Op[list[GroupInfo]]:
    """The page `start`..`end` of the index's groups (`listed`, of `known`)
    followed by the unlisted ones, read."""
    ids = list(listed)
    if end < 0 or start + len(ids) <= end:  # (the index ran out on this page)
        first = max(start - known, 0)
        ids += unlisted[first : None if end < 0 else first + end - start + 1 - len(ids)]
    if not ids:
        return []
    return (yield from read_groups(keys, ids, now))


def find_groups(
    keys: QueueKeys, text: str, limit: int, now: int, calls: int = SEARCH_CALLS
) -> Op[GroupSearch]:
    """The known groups whose id holds `text` (a valid group id fragment, so
    no glob character): the `limit` first in the index's order (largest
    backlog first, as get_groups), read, and how many matched. The index is
    scanned at most `calls` ZSCAN pages; groups it forgot while their jobs
    run are not searched (their jobs' pages name them)."""
    pattern = f"*{text}*"
    scores: dict[str, float] = {}  # (a ZSCAN may answer an entry twice)
    cursor = 0
    for _ in range(calls):
        # (redis-py parses the reply: an int cursor, (member, score) pairs)
        cursor, page = yield Cmd(
            ("ZSCAN", keys.groups_index, cursor, "MATCH", pattern, "COUNT", SEARCH_PAGE)
        )
        scores.update(page)
        if cursor == 0:
            break
    # (ZREVRANGE's order: score, then id, both descending)
    best = heapq.nlargest(limit, scores, key=lambda g: (scores[g], g))
    found = yield from read_groups(keys, best, now)
    return GroupSearch(found, len(scores), cursor == 0)


def count_groups(keys: QueueKeys) -> Op[int]:
    """How many groups the queue has: those the index lists, and those it
    forgot while their jobs run."""
    known, unlisted = yield [Cmd(("ZCARD", keys.groups_index)), unlisted_groups(keys)]
    return int(known) + len(unlisted)


def summary(keys: QueueKeys) -> Op[GroupSummary]:
    """Totals over the queue's groups, in O(1) reads (and, while grouped jobs
    run, a look at `active` for the groups the index forgot: unlisted_groups)."""
    groups, unlisted, waiting, active, paused, held = yield [
        Cmd(("ZCARD", keys.groups_index)),
        unlisted_groups(keys),
        grouped_waiting(keys),
        Cmd(("HGET", keys.groups_meta, "running")),
        Cmd(("SCARD", keys.groups_paused)),
        Cmd(("SCARD", keys.groups_held)),
    ]
    return GroupSummary(
        groups=int(groups) + len(unlisted),
        waiting=sum(int(n) for n in waiting),
        active=max(int(active or 0), 0),
        paused=int(paused),
        held=int(held),
    )


class GroupMethods(MakesJobs[Q]):
    """The group API of `Queue` and `AsyncQueue` (docs/groups.md)."""

    @op_method
    def set_group(
        self,
        group: str,
        *,
        weight: Any = UNSET,
        concurrency: Any = UNSET,
        rate_max: Any = UNSET,
        rate_duration_ms: Any = UNSET,
    ) -> Op[int]:
        """Change a group's own settings (None clears one: the default applies;
        concurrency 0 means no limit even over a default)."""
        args = settings_args(
            dict(
                weight=weight,
                concurrency=concurrency,
                rate_max=rate_max,
                rate_duration_ms=rate_duration_ms,
            )
        )
        return admin(self.keys, "set", group, args)

    @op_method
    def set_group_defaults(
        self,
        *,
        weight: Any = UNSET,
        concurrency: Any = UNSET,
        rate_max: Any = UNSET,
        rate_duration_ms: Any = UNSET,
    ) -> Op[int]:
        """Change the settings every group without its own uses."""
        args = settings_args(
            dict(
                weight=weight,
                concurrency=concurrency,
                rate_max=rate_max,
                rate_duration_ms=rate_duration_ms,
            )
        )
        return admin(self.keys, "defaults", "", args)

    @op_method
    def get_group_defaults(self) -> Op[GroupSettings]:
        """The defaults as stored."""
        return _settings(Cmd(("HGETALL", self.keys.groups_meta)))

    @op_method
    def pause_group(self, group: str) -> Op[int]:
        """Stop workers taking the group's jobs; they stay waiting."""
        return admin(self.keys, "pause", group, {})

    @op_method
    def resume_group(self, group: str) -> Op[int]:
        """Let workers take the group's jobs again."""
        return admin(self.keys, "resume", group, {})

    @op_method
    def hold_group(
        self,
        group: str,
        reason: str,
        until_ms: int | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Op[int]:
        """Hold the group (e.g. `quota`) until `until_ms` or a release."""
        if not isinstance(reason, str) or not 0 < len(reason) <= 40:
            raise InvalidJobOptions("hold reason must be 1-40 characters")
        args = {"reason": reason, "until": until_ms, "info": dict(info or {})}
        return admin(self.keys, "hold", group, args)

    @op_method
    def release_group(self, group: str, reason: str | None = None) -> Op[int]:
        """End the group's hold (only a hold of `reason`, when given); 0
        when it had no such hold."""
        return admin(self.keys, "release", group, {"reason": reason})

    @op_method
    def get_group(self, group: str) -> Op[GroupInfo | None]:
        """One group, or None when the queue has never seen it."""
        validate_group_id(group)
        return _one(read_groups(self.keys, [group], now_ms()))

    @op_method
    def find_groups(self, text: str, limit: int = 20) -> Op[GroupSearch]:
        """The groups whose id holds `text`: the `limit` with the largest
        backlogs (as get_groups orders them), how many matched, and whether
        the whole index was searched (SEARCH_CALLS pages of it at most)."""
        validate_group_id(text)
        if limit < 1:
            raise ValueError("limit must be >= 1")
        return find_groups(self.keys, text, limit, now_ms())

    @op_method
    def get_groups(self, start: int = 0, end: int = 19) -> Op[list[GroupInfo]]:
        """A page of groups, the largest backlog first."""
        return page_groups(self.keys, start, end, now_ms())

    @op_method
    def get_groups_and_count(
        self, start: int = 0, end: int = 19
    ) -> Op[tuple[list[GroupInfo], int]]:
        """get_groups and count_groups at once (one look at `active`)."""
        return page_and_count(self.keys, start, end, now_ms())

    @op_method
    def count_groups(self) -> Op[int]:
        """How many groups the queue has (as get_groups lists them)."""
        return count_groups(self.keys)

    @op_method
    def get_group_summary(self) -> Op[GroupSummary]:
        """Groups, waiting and active grouped jobs, paused and held groups."""
        return summary(self.keys)

    @op_method
    def get_group_turn(self, group: str) -> Op[int | None]:
        """How many turns come before the group's next (None: it has no
        ticket in the queue now, e.g. parked or empty)."""
        validate_group_id(group)
        return _turn(self.keys, group)

    @op_method
    def get_group_jobs(
        self, group: str, start: int = 0, end: int = 19
    ) -> Op[list[Job[Q]]]:
        """The group's waiting jobs, in the order workers will take them."""
        validate_group_id(group)
        return self._group_jobs(group, start, end)

    def _group_jobs(self, group: str, start: int, end: int) -> Op[list[Job[Q]]]:
        if start < 0 or 0 <= end < start:
            return []
        ids = yield Eval(
            "group_reads",
            (self.keys.groups_meta,),
            (self.keys.base, "jobs", group, str(end + 1 if end >= 0 else -1)),
        )
        ids = list(ids)[start : end + 1 if end >= 0 else None]
        if not ids:
            return []
        reads = yield from get_job_hashes(self.keys, ids, None, False)
        return [
            self._job(i, r.fields, r.left_out)
            for i, r in zip(ids, reads)
            if r.fields or r.left_out
        ]


def _settings(request: Cmd) -> Op[GroupSettings]:
    h = yield request
    return GroupSettings.from_hash(h or {})


def _one(op: Op[list[GroupInfo]]) -> Op[GroupInfo | None]:
    found = yield from op
    return found[0] if found else None


def group_turns(keys: QueueKeys, groups: list[str]) -> Op[dict[str, int | None]]:
    """Each group's tickets ahead of its first in the queue of tickets
    (None: it has none there): with weight 1, the groups going first."""
    if not groups:
        return {}
    counts = yield group_counts(keys, groups, scan=0)
    return {g: (int(c[3]) if int(c[3]) >= 0 else None) for g, c in zip(groups, counts)}


def group_ranks(
    keys: QueueKeys, jobs: Sequence[tuple[str, str]]
) -> Op[list[int | None]]:
    """Each (job id, group)'s jobs of its group ahead of it (None: it does
    not wait in its group), one group_reads.lua call for all."""
    args: list[str] = []
    for job_id, group in jobs:
        args += [group, job_id]
    reply = yield Eval("group_reads", (keys.groups_meta,), (keys.base, "ranks", *args))
    return [n if (n := int(r)) >= 0 else None for r in reply]


def _turn(keys: QueueKeys, group: str) -> Op[int | None]:
    turns = yield from group_turns(keys, [group])
    return turns[group]
