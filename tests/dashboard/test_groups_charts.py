"""The queue chart's "waiting by group": each sampled point keeps the five
largest group backlogs and every group's total (bounded whatever the
number of groups), rollups keep five, and the chart JSON names five groups
and `(other)`, the rest."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from gpu_workers.keys import BullpenKeys
from gpu_workers.series import SeriesSampler, points, store
from gpu_workers.series.read import group_columns
from gpu_workers.series.sampler import last_minute
from queues import Queue, ops
from tests.dashboard.test_groups_page import add_groups

pytestmark = pytest.mark.usefixtures("dashboard_redis")


def test_a_point_keeps_the_five_largest_backlogs(redis_url: str, q: Queue) -> None:
    """The sampler's point of a queue with 8 groups names the 5 largest
    backlogs and the grouped total; a queue without groups has neither."""
    add_groups(q, {f"g{i}": i + 1 for i in range(8)})
    plain = Queue(q.name + "-plain", redis_url)
    plain.add("job", {})
    now = ops.now_ms()
    sampler = SeriesSampler(redis_url)
    assert sampler.tick([("bull", q.name), ("bull", plain.name)], False, now) == 2
    minute = last_minute(now)
    keys = BullpenKeys()
    level = store.LEVEL_NAMES[0]
    [[point], [bare]] = store.read(
        sampler.client,
        [keys.series("bull", q.name, level), keys.series("bull", plain.name, level)],
        minute,
        minute + 60_000,
    )
    assert point["g"] == {"g7": 8, "g6": 7, "g5": 6, "g4": 5, "g3": 4}
    assert point["gw"] == sum(range(1, 9)) and point["b"] == sum(range(1, 9))
    assert "g" not in bare and "gw" not in bare
    plain.close()


def test_rollups_keep_five_groups() -> None:
    """Ten minutes whose largest groups change roll up into one point naming
    the five largest on average."""
    minutes = [
        {"t": i * 60_000, "m": 1, "g": {f"a{i}": 10, "steady": 5}, "gw": 20}
        for i in range(10)
    ]
    rolled = points.over_time(minutes, 0)
    assert len(rolled["g"]) == points.GROUPS_KEPT
    assert rolled["g"]["steady"] == 5 and rolled["gw"] == 20
    assert "g" not in points.over_queues(minutes, 0)


def test_group_columns_name_five_and_the_rest() -> None:
    """The range's five largest groups get a column each; `(other)` is the
    grouped total less them; a minute not sampled is a gap."""
    starts = [0, 60_000, 120_000]
    by_t = {
        0: {"t": 0, "g": {f"g{i}": 10 - i for i in range(5)}, "gw": 50},
        60_000: {"t": 60_000, "g": {"g0": 9, "late": 30}, "gw": 45},
    }
    cols = group_columns(starts, by_t)
    assert [c["id"] for c in cols] == ["late", "g0", "g1", "g2", "g3", "(other)"]
    assert cols[0]["waiting"] == [0, 30, None]
    assert cols[1]["waiting"] == [10, 9, None]
    assert cols[-1]["waiting"] == [50 - (10 + 9 + 8 + 7), 45 - 39, None]
    assert group_columns(starts, {0: {"t": 0}}) == []


def test_chart_json_has_waiting_by_group(viewer_client: Client, q: Queue) -> None:
    """The queue's series JSON carries the group columns, read live for the
    open minute: 5 named groups and `(other)`."""
    add_groups(q, {f"g{i}": i + 1 for i in range(7)})
    url = reverse("bullpen:queue-series", args=["bull", q.name])
    got = viewer_client.get(url).json()
    groups = got["groups"]
    assert [g["id"] for g in groups] == ["g6", "g5", "g4", "g3", "g2", "(other)"]
    assert all(len(g["waiting"]) == 60 for g in groups)
    assert groups[0]["waiting"][-1] == 7 and groups[-1]["waiting"][-1] == 1 + 2
