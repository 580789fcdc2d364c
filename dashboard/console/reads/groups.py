"""A queue's groups (docs/groups.md) as the pages read them: the queue page's
panel (summary and the largest backlogs), a page of every group, one group
with its waiting jobs in claim order. Every read is bounded by the page it
shows (`get_groups` reads a range of the groups' index, never all of them).
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef
from dashboard.shared.redis import client, queue
from gpu_workers.quota import QUOTA_HOLD, Quota, Quotas
from queues import Job, ops
from queues.group_types import GroupInfo, GroupSearch, GroupSettings, GroupSummary
from queues.names import GROUP_ID_RULE, is_group_id

__all__ = ["GROUP_ID_RULE"]

#: Groups the queue page's panel lists (the largest backlogs).
PANEL_GROUPS = 20


def valid_group_id(group_id: str) -> bool:
    """Whether `group_id` is one a group may have (user input is checked
    before any key is named with it)."""
    return is_group_id(group_id)


@dataclass
class GroupRow:
    """One group as a row shows it: its state in words and when it changes."""

    info: GroupInfo
    #: GroupInfo.state(): "paused", "held", "rate-limited", "at-concurrency",
    #: "ready" (taking turns), "running" or "idle".
    state: str
    #: Epoch ms the hold or the rate window ends (None: no end known).
    until_ms: int | None
    #: Its GPU-time budget and use today (gpu_workers/quota.py); None: not read.
    quota: Quota | None = None

    @property
    def budget_text(self) -> str:
        """The budget in GPU-seconds, shortest ("" for none: a form's value)."""
        budget = self.quota.budget_s if self.quota is not None else None
        return "" if budget is None else f"{budget:.3f}".rstrip("0").rstrip(".")

    @property
    def quota_held(self) -> bool:
        """Whether the group waits for its budget (held for its quota)."""
        return self.info.hold == QUOTA_HOLD


def row(info: GroupInfo, now_ms: int) -> GroupRow:
    """A GroupInfo with its state named (pause first: it outlasts a hold)."""
    state = info.state(now_ms)
    ends = {"held": info.hold_until_ms, "rate-limited": info.limited_until_ms}
    return GroupRow(info, state, ends.get(state))


@dataclass
class GroupPanel:
    """The queue page's Groups panel."""

    summary: GroupSummary
    rows: list[GroupRow]
    #: The settings every group without its own uses.
    defaults: GroupSettings


def quotas() -> Quotas:
    """The budgets of the Redis the pages read (the settings' namespace)."""
    return Quotas(client(), conf.get().namespace)


def with_quotas(ref: QueueRef, rows: list[GroupRow]) -> list[GroupRow]:
    """The rows with their quotas, read for these groups only (one round trip)."""
    if rows:
        keys = queue(ref.prefix, ref.name).keys
        found = quotas().get_quotas(keys, [r.info.id for r in rows])
        for r in rows:
            r.quota = found.get(r.info.id)
    return rows


def _rows(ref: QueueRef, infos: list[GroupInfo]) -> list[GroupRow]:
    """The groups as rows (their states as of now) with their quotas."""
    now = ops.now_ms()
    return with_quotas(ref, [row(g, now) for g in infos])


def group_panel(ref: QueueRef) -> GroupPanel | None:
    """The summary and the PANEL_GROUPS largest backlogs, or None when the
    queue has no group (the panel is not shown)."""
    q = queue(ref.prefix, ref.name)
    summary = q.get_group_summary()
    if summary.groups == 0:
        return None
    rows = _rows(ref, q.get_groups(0, PANEL_GROUPS - 1))
    return GroupPanel(summary, rows, q.get_group_defaults())


def groups_page(ref: QueueRef, page_no: int, size: int) -> tuple[list[GroupRow], int]:
    """One page of every group, largest backlog first, and how many there are."""
    q = queue(ref.prefix, ref.name)
    start = (page_no - 1) * size
    found, total = q.get_groups_and_count(start, start + size - 1)
    return _rows(ref, found), total


def find_groups(
    ref: QueueRef, text: str, limit: int
) -> tuple[list[GroupRow], GroupSearch]:
    """The rows of the `limit` groups with the largest backlogs whose id
    holds `text`, and the search (how many matched, whether complete)."""
    found = queue(ref.prefix, ref.name).find_groups(text, limit)
    return _rows(ref, found.groups), found


def group(ref: QueueRef, group_id: str) -> GroupRow | None:
    """One group, or None when the queue has no such group."""
    found = queue(ref.prefix, ref.name).get_group(group_id)
    if found is None:
        return None
    return _rows(ref, [found])[0]


def group_jobs(ref: QueueRef, group_id: str, start: int, end: int) -> list[Job]:
    """The group's waiting jobs `start`..`end` in the order workers take them."""
    jobs: list[Job] = queue(ref.prefix, ref.name).get_group_jobs(group_id, start, end)
    return jobs
