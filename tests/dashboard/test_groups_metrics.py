"""/metrics per group (docs/groups.md): the top N groups by backlog labelled,
one `(other)` series for the rest, totals per queue; bounded labels and a
bounded cost with 10,000 groups."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from queues import Queue
from tests.dashboard.test_groups_page import add_groups
from tests.dashboard.test_metrics import samples, scrape, value
from tests.queues.transitions.helpers import claimed, move_to_active

pytestmark = pytest.mark.django_db


def test_top_groups_other_and_totals(
    dashboard_redis: str, qname: str, settings: Any
) -> None:
    """The N largest backlogs have a series each, `(other)` adds up the
    rest, and the totals count groups, paused and held ones."""
    settings.BULLPEN_METRICS_TOP_GROUPS = 2
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"a": 5, "b": 3, "c": 2, "d": 1})
    q.pause_group("c")
    q.hold_group("d", "quota")
    Queue(qname + "-plain", dashboard_redis).add("job", {})
    families = scrape()
    key = f"bull:{qname}"
    waiting = families["bullpen_group_waiting"]
    assert {s.labels["group"]: s.value for s in samples(waiting, queue=key)} == {
        "a": 5,
        "b": 3,
        "(other)": 3,
    }
    active = families["bullpen_group_active"]
    assert {s.labels["group"] for s in samples(active, queue=key)} == {
        "a",
        "b",
        "(other)",
    }
    assert value(families["bullpen_groups"], queue=key) == 4
    assert value(families["bullpen_groups_paused"], queue=key) == 1
    assert value(families["bullpen_groups_held"], queue=key) == 1
    # A queue without groups adds no group series.
    assert samples(families["bullpen_groups"], queue=f"{key}-plain") == []
    assert samples(waiting, queue=f"{key}-plain") == []


def test_labels_and_cost_stay_bounded_with_ten_thousand_groups(
    dashboard_redis: str, r: redis.Redis, qname: str
) -> None:
    """10,000 groups make 21 waiting series (20 and `(other)`), and a scrape
    sends as many commands as with 30 groups."""
    q = Queue(qname, dashboard_redis)

    def commands_per_scrape() -> int:
        scrape()  # scripts loaded, discovery cached
        r.config_resetstat()
        scrape()
        stats = r.info("commandstats")
        # SCAN: queue discovery walks the keyspace (every group has keys).
        skipped = ("cmdstat_config", "cmdstat_scan")
        return sum(v["calls"] for k, v in stats.items() if k not in skipped)

    add_groups(q, {f"s{i:02d}": 1 for i in range(30)})
    small = commands_per_scrape()
    add_groups(q, {f"g{i:05d}": 1 for i in range(10_000 - 30)})
    assert commands_per_scrape() == small
    families = scrape()
    key = f"bull:{qname}"
    waiting = samples(families["bullpen_group_waiting"], queue=key)
    assert len(waiting) == 21
    assert sum(s.value for s in waiting) == 10_000
    assert len(samples(families["bullpen_group_active"], queue=key)) == 21
    assert value(families["bullpen_groups"], queue=key) == 10_000


def test_a_group_forgotten_while_its_job_runs_is_still_counted(
    dashboard_redis: str, qname: str
) -> None:
    """Every group of a queue has left the index (nothing waits) while their
    jobs run: the queue still has its group series, each job counted."""
    q = Queue(qname, dashboard_redis)
    add_groups(q, {"solo": 1, "busy": 1})
    assert len(claimed(move_to_active(q, count=2))) == 2
    q.add("job", {}, group="late")  # the next turn: solo and busy are forgotten
    assert len(claimed(move_to_active(q))) == 1
    assert claimed(move_to_active(q)) == []  # idle: late is forgotten too
    assert q.client.zcard(q.keys.groups_index) == 0
    families = scrape()
    key = f"bull:{qname}"
    assert value(families["bullpen_groups"], queue=key) == 3
    active = families["bullpen_group_active"]
    assert {s.labels["group"]: s.value for s in samples(active, queue=key)} == {
        "busy": 1,
        "late": 1,
        "solo": 1,
    }
