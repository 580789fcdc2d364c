"""Why a waiting grouped job (docs/groups.md) is not running yet: what its
group's state says, in this order, each that holds:

- `group_paused`: the group is paused (or held for a reason other than a
  quota: the hold's reason and end in the numbers)
- `quota_exhausted`: the group used its GPU-seconds budget today
  (gpu_workers/quota.py): used, budget, until when (the next UTC midnight)
- `group_concurrency`: the group's concurrency is reached (n of n active)
- `group_rate_limited`: the group's rate window is full until a time
- `group_turn`: none of those; how many turns go before its group's next
  (`get_group_turn`: with weight 1, the groups going first) and how many of
  its group's jobs are ahead of it

The reads are one more pipelined round trip for every grouped job of a list
together (each group's state once, its turn, each job's rank in its group).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from queues.drive import gather
from queues.group_types import GroupInfo
from queues.groups import group_ranks, group_turns, read_groups
from queues.keys import QueueKeys
from queues.ops import Op

from ..quota import QUOTA_HOLD
from .reasons import WaitingReason, at

#: The pseudo-state a grouped job's own reads go by (reads.py): it is in no
#: list a BullMQ worker reads, so its place is its group's, read here.
GROUPED = "grouped"


def job_group(job: Any) -> str | None:
    """The group a job waits in (its hash field `gid`, set once Bullpen placed
    it in its group), else None: an ungrouped job, or one a Node producer
    added to `wait` that no Bullpen claim adopted yet."""
    raw = getattr(job, "raw", None)
    gid = raw.get("gid") if isinstance(raw, dict) else None
    return gid if isinstance(gid, str) and gid else None


@dataclass
class GroupFacts:
    """A grouped job's group as read, its group's turn and its own rank."""

    group: str
    info: GroupInfo | None
    #: Turns before its group's next (None: its group has no ticket queued).
    groups_ahead: int | None
    #: Jobs of its group before it (None: no longer in its group's set).
    ahead_in_group: int | None


def group_facts_op(
    keys: QueueKeys, jobs: Sequence[tuple[str, str]], now_ms: int
) -> Op[dict[str, GroupFacts]]:
    """Each (job id, group)'s GroupFacts by job id, in one round trip."""
    if not jobs:
        return {}
    groups = sorted({g for _, g in jobs})
    infos, turns, ranks = yield from gather(
        [
            read_groups(keys, groups, now_ms),
            group_turns(keys, groups),
            group_ranks(keys, jobs),
        ]
    )
    by_id = {info.id: info for info in infos}
    return {
        job_id: GroupFacts(group, by_id.get(group), turns.get(group), rank)
        for (job_id, group), rank in zip(jobs, ranks)
    }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _held(g: GroupFacts, info: GroupInfo, now_ms: int) -> WaitingReason:
    until = info.hold_until_ms
    numbers: dict[str, Any] = {"group": g.group, "until_ms": until}
    if until is not None:
        numbers["in_ms"] = max(until - now_ms, 0)
    ends = f"until {at(until, now_ms)}" if until is not None else "until released"
    if info.hold == QUOTA_HOLD:
        used = _number(info.hold_info.get("used_s"))
        budget = _number(info.hold_info.get("budget_s"))
        numbers.update(used_s=used, budget_s=budget, day=info.hold_info.get("day"))
        spent = (
            f": {used:,.0f} of {budget:,.0f} GPU-seconds used today"
            if used is not None and budget is not None
            else ""
        )
        return WaitingReason(
            "quota_exhausted",
            f"Group {g.group} has used its GPU-time quota{spent}; it waits {ends} "
            "or until an admin raises its budget",
            numbers,
        )
    numbers["hold"] = info.hold
    return WaitingReason(
        "group_paused", f"Group {g.group} is held ({info.hold}) {ends}", numbers
    )


def _turn(g: GroupFacts) -> WaitingReason:
    ahead, mine = g.groups_ahead, g.ahead_in_group
    numbers = {"group": g.group, "groups_ahead": ahead, "ahead_in_group": mine}
    if ahead is None:
        text = f"Group {g.group} has no turn queued right now"
    elif ahead == 0:
        text = f"Group {g.group}'s turn is now"
    else:
        plural = "s take their turns" if ahead != 1 else " takes its turn"
        text = f"{ahead:,} group{plural} before group {g.group}'s"
    if mine is None:
        text += "; the job is no longer where it was read (it moved)"
    elif mine == 0:
        text += "; next in its group"
    else:
        text += f"; {mine:,} job{'s' if mine != 1 else ''} of its group ahead of it"
    return WaitingReason("group_turn", text, numbers)


def group_reasons(g: GroupFacts, now_ms: int) -> list[WaitingReason]:
    """The reasons a grouped ready job waits, primary first: its group's
    pause or hold, quota, concurrency, rate window, then its turn."""
    info = g.info
    found: list[WaitingReason] = []
    if info is not None:
        if info.paused:
            found.append(
                WaitingReason(
                    "group_paused",
                    f"Group {g.group} is paused: no worker takes its jobs",
                    {"group": g.group},
                )
            )
        if info.hold:
            found.append(_held(g, info, now_ms))
        if info.at_concurrency:
            found.append(
                WaitingReason(
                    "group_concurrency",
                    f"Group {g.group}'s concurrency is reached: {info.active} of "
                    f"{info.concurrency} jobs running",
                    {
                        "group": g.group,
                        "active": info.active,
                        "concurrency": info.concurrency,
                    },
                )
            )
        until = info.limited_until_ms
        if until is not None and until > now_ms:
            found.append(
                WaitingReason(
                    "group_rate_limited",
                    f"Group {g.group} is rate-limited until {at(until, now_ms)} "
                    f"(at most {info.rate_max} jobs per {info.rate_duration_ms} ms)",
                    {
                        "group": g.group,
                        "until_ms": until,
                        "in_ms": until - now_ms,
                        "max": info.rate_max,
                        "duration_ms": info.rate_duration_ms,
                    },
                )
            )
    found.append(_turn(g))
    return found
