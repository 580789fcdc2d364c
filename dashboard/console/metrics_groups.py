"""The /metrics families of groups (docs/groups.md), per queue that has any.

Labels stay bounded whatever the number of groups: the `group` label names
the queue's BULLPEN_METRICS_TOP_GROUPS largest backlogs, and one `(other)`
series adds up the rest (from the summary's totals, so the rest are never
read one by one). A scrape reads the summary and that many groups per queue
with groups (`get_group_summary`, `get_groups`), never every group.

  bullpen_group_waiting{queue,group}   waiting jobs of the group (or the rest)
  bullpen_group_active{queue,group}    active jobs of the group (or the rest)
  bullpen_groups{queue}                groups the queue knows
  bullpen_groups_paused{queue}         groups paused
  bullpen_groups_held{queue}           groups held (a quota, ...)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef
from dashboard.shared.redis import queue

#: The `group` label of the series adding up every group past the top N.
OTHER = "(other)"


def group_families(
    refs: Sequence[QueueRef], top: int | None = None
) -> Iterable[Metric]:
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
    for ref in refs:
        q = queue(ref.prefix, ref.name)
        if not q.count_groups():
            continue
        summary = q.get_group_summary()
        shown = q.get_groups(0, n - 1) if n > 0 else []
        label = ref.key
        for g in shown:
            waiting.add_metric([label, g.id], float(g.waiting))
            active.add_metric([label, g.id], float(g.active))
        rest_waiting = summary.waiting - sum(g.waiting for g in shown)
        rest_active = summary.active - sum(g.active for g in shown)
        if summary.groups > len(shown):
            waiting.add_metric([label, OTHER], float(max(rest_waiting, 0)))
            active.add_metric([label, OTHER], float(max(rest_active, 0)))
        count.add_metric([label], float(summary.groups))
        paused.add_metric([label], float(summary.paused))
        held.add_metric([label], float(summary.held))
    return [waiting, active, count, paused, held]
