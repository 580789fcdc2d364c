"""The /metrics families of groups (docs/groups.md), per queue that has any.

Labels stay bounded whatever the number of groups: the `group` label names
the queue's BULLPEN_METRICS_TOP_GROUPS largest backlogs, and one `(other)`
series adds up the rest (from the summary's totals, so the rest are never
read one by one). A scrape reads, in pipelined steps over every queue, each
queue's group count, then for those with groups their summary and that many
groups (`queues.groups.summary`, `page_groups`): never every group.

  bullpen_group_waiting{queue,group}   waiting jobs of the group (or the rest)
  bullpen_group_active{queue,group}    active jobs of the group (or the rest)
  bullpen_groups{queue}                groups the queue knows
  bullpen_groups_paused{queue}         groups paused
  bullpen_groups_held{queue}           groups held (a quota, ...)
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from dashboard.console import reads
from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef
from queues import codec, ops
from queues.drive import cmd, gather
from queues.group_types import GroupInfo, GroupSummary
from queues.groups import page_groups, summary
from queues.keys import QueueKeys

#: The `group` label of the series adding up every group past the top N.
OTHER = "(other)"


def _read(
    refs: Sequence[QueueRef], top: int
) -> list[tuple[QueueRef, GroupSummary, list[GroupInfo]]]:
    """Each queue with groups, its summary and its `top` largest backlogs."""
    keys = [QueueKeys(r.name, r.prefix) for r in refs]
    # Groups listed, or grouped jobs running (their groups maybe forgotten).
    found_n = reads.run(
        gather(
            [cmd("ZCARD", k.groups_index) for k in keys]
            + [cmd("HGET", k.groups_meta, "running") for k in keys]
        )
    )
    counts, running = found_n[: len(keys)], found_n[len(keys) :]
    found = [
        (r, k)
        for r, k, n, run in zip(refs, keys, counts, running)
        if n or (codec.to_int(run) or 0) > 0
    ]
    if not found:
        return []
    totals = reads.run(gather([summary(k) for _, k in found]))
    if top <= 0:  # no group named: (other) is every group
        return [(ref, t, []) for (ref, _), t in zip(found, totals)]
    now = ops.now_ms()
    pages = reads.run(gather([page_groups(k, 0, top - 1, now) for _, k in found]))
    return [(ref, t, p) for (ref, _), t, p in zip(found, totals, pages)]


def group_families(refs: Sequence[QueueRef], top: int | None = None) -> list[Metric]:
    """The groups' families of `refs` (a queue without groups adds nothing)."""
    n = conf.get().metrics_top_groups if top is None else top
    waiting = GaugeMetricFamily(
        "bullpen_group_waiting",
        f"Waiting jobs of the {n} groups with the largest backlog; "
        f'group="{OTHER}" adds up the others',
        labels=["queue", "group"],
    )
    active = GaugeMetricFamily(
        "bullpen_group_active",
        f"Active jobs of the {n} groups with the largest backlog; "
        f'group="{OTHER}" adds up the others',
        labels=["queue", "group"],
    )
    count = GaugeMetricFamily(
        "bullpen_groups", "Groups the queue knows", labels=["queue"]
    )
    paused = GaugeMetricFamily(
        "bullpen_groups_paused", "Groups paused", labels=["queue"]
    )
    held = GaugeMetricFamily(
        "bullpen_groups_held", "Groups held (a quota, ...)", labels=["queue"]
    )
    for ref, totals, shown in _read(refs, n):
        label = ref.key
        for g in shown:
            waiting.add_metric([label, g.id], float(g.waiting))
            active.add_metric([label, g.id], float(g.active))
        if totals.groups > len(shown):
            rest_waiting = totals.waiting - sum(g.waiting for g in shown)
            rest_active = totals.active - sum(g.active for g in shown)
            waiting.add_metric([label, OTHER], float(max(rest_waiting, 0)))
            active.add_metric([label, OTHER], float(max(rest_active, 0)))
        count.add_metric([label], float(totals.groups))
        paused.add_metric([label], float(totals.paused))
        held.add_metric([label], float(totals.held))
    return [waiting, active, count, paused, held]
