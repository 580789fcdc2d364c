"""The charts' JSON views and pages against the real test Redis: validated
range, 404 for an unknown queue, the series' shape, the overall chart adding
queues up, the GPU chart per GPU, and the pages carrying the chart sections."""

from __future__ import annotations

import pytest
import redis
from django.test import Client
from django.urls import reverse

from dashboard.console.display import sparkline
from dashboard.console.views.overview import peak
from queues import Queue
from tests.dashboard.helpers import gpu_fleet, run_jobs
from tests.gpu_workers.fleet_records import gpu_uuid, host_name, publish_fleet

pytestmark = pytest.mark.usefixtures("dashboard_redis")


def test_queue_series_counts_this_minute_and_validates_its_range(
    viewer_client: Client, q: Queue
) -> None:
    """A queue's series: 60 one-minute points for 1 h, the open minute read
    live; a range not offered is a 400 saying which are, an unknown queue 404."""
    run_jobs(q, 3, target="completed", value=1)
    run_jobs(q, 1, target="failed")
    url = reverse("bullpen:queue-series", args=["bull", q.name])
    got = viewer_client.get(url).json()
    assert got["range"] == "1h" and got["step_s"] == 60 and len(got["t"]) == 60
    for column in ("completed", "failed", "wait_p95", "run_p50", "backlog", "oldest"):
        assert len(got[column]) == 60
    # (the last two minutes: the jobs may have finished just before a minute began)
    assert sum(v or 0 for v in got["completed"][-2:]) == 3
    assert sum(v or 0 for v in got["failed"][-2:]) == 1 and got["backlog"][-1] == 0
    day = viewer_client.get(url, {"range": "24h"}).json()
    assert day["step_s"] == 600 and len(day["t"]) == 144
    bad = viewer_client.get(url, {"range": "1y"})
    assert bad.status_code == 400 and "1h, 24h, 7d" in bad.json()["error"]
    missing = viewer_client.get(reverse("bullpen:queue-series", args=["bull", "nope"]))
    assert missing.status_code == 404 and "No such queue" in missing.json()["error"]


def test_overall_series_adds_queues_up(
    viewer_client: Client, redis_url: str, q: Queue
) -> None:
    """The overview's chart sums the queues' finished jobs."""
    other = Queue(q.name + "b", redis_url)
    run_jobs(q, 2, target="completed", value=1)
    run_jobs(other, 5, target="completed", value=1)
    got = viewer_client.get(reverse("bullpen:series-overall"), {"range": "1h"}).json()
    assert sum(v or 0 for v in got["completed"][-2:]) == 7 and got["queues"] == 2
    other.close()


def test_gpu_series_lists_each_gpu(viewer_client: Client, r: redis.Redis) -> None:
    """Per GPU: host, name, total, and utilisation / committed now."""
    gpu_fleet(r)
    got = viewer_client.get(reverse("bullpen:gpus-series"), {"range": "7d"}).json()
    assert got["step_s"] == 3600 and len(got["t"]) == 168
    gpus = {g["uuid"]: g for g in got["gpus"]}
    assert set(gpus) == {"GPU-abc", "SIM-h1-0"}
    one_min = viewer_client.get(reverse("bullpen:gpus-series")).json()
    real = {g["uuid"]: g for g in one_min["gpus"]}["GPU-abc"]
    assert real["util"][-1] == 87 and real["committed"][-1] == 30 * 2**30


def test_gpu_series_follows_the_hosts_the_page_shows(
    viewer_client: Client, r: redis.Redis
) -> None:
    """At 6 hosts x 8 GPUs the chart holds the GPUs of the page's hosts (4
    a page), with the page's filters and page number, never every GPU."""
    publish_fleet(r, 6)
    url = reverse("bullpen:gpus-series")

    def hosts(query: dict[str, str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for g in viewer_client.get(url, query).json()["gpus"]:
            found[g["host"]] = found.get(g["host"], 0) + 1
        return found

    first = [host_name(h) for h in range(4)]
    assert hosts({}) == dict.fromkeys(first, 8)
    assert hosts({"page": "2"}) == {host_name(4): 8, host_name(5): 8}
    assert hosts({"host": host_name(5)}) == {host_name(5): 8}
    one = viewer_client.get(url, {"gpu": gpu_uuid(2, 3)}).json()["gpus"]
    assert [g["uuid"] for g in one] == [gpu_uuid(2, 3)]
    page = viewer_client.get(reverse("bullpen:gpus"), {"host": host_name(5)})
    assert f"{url}?host={host_name(5)}" in page.content.decode()


def test_pages_carry_their_charts(viewer_client: Client, q: Queue) -> None:
    """Queue page, overview and GPU page each have a chart section pointing
    at their series; people without the view permission get none of it."""
    run_jobs(q, 1, target="completed", value=1)
    pages = {
        reverse("bullpen:queue", args=["bull", q.name]): reverse(
            "bullpen:queue-series", args=["bull", q.name]
        ),
        reverse("bullpen:overview"): reverse("bullpen:series-overall"),
        reverse("bullpen:gpus"): reverse("bullpen:gpus-series"),
    }
    for page, series in pages.items():
        body = viewer_client.get(page).content.decode()
        assert f'data-charts-url="{series}"' in body and "uPlot.iife.min.js" in body


def test_series_need_the_view_permission(nobody_client: Client) -> None:
    """Without view permission the series answer 403."""
    assert nobody_client.get(reverse("bullpen:series-overall")).status_code == 403


def test_sparkline_draws_both_lines_on_one_scale() -> None:
    """One failure beside 28 completions stays near the bottom: both lines of
    an overview row share the row's peak."""
    done, failed = [0, 28, 0], [0, 1, 0]

    class Row:
        completed_per_min, failed_per_min = done, failed

    top = peak(Row())  # type: ignore[arg-type]
    failed_y = float(sparkline(failed, top=top).split()[1].split(",")[1])
    done_y = float(sparkline(done, top=top).split()[1].split(",")[1])
    assert done_y < 2 and failed_y > 20
