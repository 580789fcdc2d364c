"""The GPU-time page, its CSV export and the /metrics counters, against what
the workers' own write path (GpuTimeRecorder) stored in the real test Redis;
and the job page's GPU-seconds from a real GpuWorker's attempt record."""

from __future__ import annotations

import asyncio
import csv
import io
import re
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from django.test import Client
from django.urls import reverse

from dashboard.console.reads.gputime import Choice, gpu_time
from gpu_workers.gputime import OTHER, GpuTimeRecorder, Retention, Usage
from gpu_workers.keys import BullpenKeys
from queues import Queue
from tests.dashboard.test_metrics import samples, scrape, value
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers test handlers
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("dashboard_redis")]
GiB = 2**30


def record(url: str, *usages: Usage, max_keys: int = 100) -> None:
    """Count attempts as a GPU worker does (its recorder, its script)."""

    async def run() -> None:
        client = aioredis.Redis.from_url(url, decode_responses=True)
        recorder = GpuTimeRecorder(client, BullpenKeys(), Retention(max_keys=max_keys))
        for usage in usages:
            await recorder.record(usage)
        await client.aclose()

    asyncio.run(run())


def usage(queue: str, name: str, tenant: str, seconds: float, **kw: Any) -> Usage:
    """An attempt that ended a second ago."""
    end = time.time() - 1
    fields: dict[str, Any] = {"vram_bytes": 2 * GiB, "simulated": False} | kw
    return Usage(queue, name, tenant, end - seconds, end, **fields)


@pytest.fixture
def counted(dashboard_redis: str) -> None:
    """Three attempts on two queues for two tenants (one simulated)."""
    record(
        dashboard_redis,
        usage("bull:render", "sdxl", "acme", 30),
        usage("bull:render", "sdxl", "acme", 20),
        usage("bull:embed", "=cmd()", "-", 10, simulated=True, vram_bytes=GiB),
    )


def rows(page: str) -> dict[str, dict[str, str]]:
    """Summary rows by key: field -> text."""
    table = page.split('id="gpu-time-summary"')[1].split("</table>")[0]
    out = {}
    for key, body in re.findall(r'<tr data-key="([^"]*)">(.*?)</tr>', table, re.S):
        cells = re.findall(r'data-field="(\w+)">([^<]*)<', body)
        out[key] = dict(cells)
    return out


def test_page_groups_sorts_and_totals(viewer_client: Client, counted: None) -> None:
    """By queue (default, last 24 h by hour): most GPU-seconds first, a total
    row, a link to each queue; by tenant and by job name too."""
    response = viewer_client.get(reverse("bullpen:gpu-time"))
    assert response.status_code == 200
    page = response.content.decode()
    found = rows(page)
    assert list(found) == ["bull:render", "bull:embed", "total"]
    assert found["bull:render"]["gpu_seconds"] == "50.0"
    assert found["bull:render"]["attempts"] == "2"
    assert found["total"]["gpu_seconds"] == "60.0"
    assert reverse("bullpen:queue", args=["bull", "render"]) in page
    assert 'class="on" aria-current="true">hour<' in page
    tenants = rows(
        viewer_client.get("/gpu-time/?group=tenant&range=7d").content.decode()
    )
    assert list(tenants) == ["acme", "-", "total"]
    names = rows(viewer_client.get("/gpu-time/?group=name&by=day").content.decode())
    assert names["=cmd()"]["gpu_seconds"] == "10.0"
    # Nonsense choices fall back to the defaults; nothing breaks.
    odd = viewer_client.get("/gpu-time/?group=x&range=9y&by=week")
    assert (
        odd.status_code == 200 and list(rows(odd.content.decode()))[0] == "bull:render"
    )


def test_page_needs_view_permission(nobody_client: Client, counted: None) -> None:
    """No view permission: 403, page and CSV."""
    assert nobody_client.get(reverse("bullpen:gpu-time")).status_code == 403
    assert nobody_client.get(reverse("bullpen:gpu-time-csv")).status_code == 403


def test_csv_export(viewer_client: Client, counted: None) -> None:
    """One row per bucket and key, unrounded figures, formulas defused."""
    response = viewer_client.get(reverse("bullpen:gpu-time-csv") + "?group=name")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    table = list(csv.DictReader(io.StringIO(response.content.decode())))
    by_key: dict[str, dict[str, float]] = {}
    for line in table:
        assert line["period"] == "hour" and line["bucket_start_utc"].endswith("Z")
        got = by_key.setdefault(line["name"], {"s": 0.0, "v": 0.0, "n": 0})
        got["s"] += float(line["gpu_seconds"])
        got["v"] += float(line["vram_gib_seconds"])
        got["n"] += int(line["attempts"])
    assert by_key["sdxl"] == {"s": pytest.approx(50), "v": pytest.approx(100), "n": 2}
    assert "'=cmd()" in by_key and "=cmd()" not in by_key
    assert by_key["'=cmd()"]["s"] == pytest.approx(10)


def test_metrics_counters(dashboard_redis: str, counted: None) -> None:
    """Running totals per queue, job name and tenant, simulated time apart."""
    families = scrape()
    seconds = families["bullpen_gpu_seconds"]
    assert value(seconds, queue="bull:render") == pytest.approx(50)
    assert value(families["bullpen_vram_gib_seconds"], queue="bull:embed") == (
        pytest.approx(10)
    )
    assert value(families["bullpen_gpu_attempts"], queue="bull:render") == 2
    sim = families["bullpen_gpu_simulated_seconds"]
    assert value(sim, queue="bull:embed") == pytest.approx(10)
    assert value(families["bullpen_tenant_gpu_seconds"], tenant="acme") == (
        pytest.approx(50)
    )
    assert value(families["bullpen_job_name_gpu_seconds"], job_name="sdxl") == (
        pytest.approx(50)
    )


def test_metrics_label_values_are_capped(dashboard_redis: str) -> None:
    """Five job names through a cap of three: three labels and (other)."""
    record(
        dashboard_redis,
        *(usage("bull:q", f"n{i}", "-", 1) for i in range(5)),
        max_keys=3,
    )
    family = scrape()["bullpen_job_name_gpu_attempts"]
    labels = {s.labels["job_name"] for s in samples(family)}
    assert labels == {"n0", "n1", "n2", OTHER}
    assert value(family, job_name=OTHER) == 2


def test_job_page_shows_its_gpu_seconds(
    viewer_client: Client, q: Queue, redis_url: str
) -> None:
    """A job a real GpuWorker ran: the attempts table gives its GPU-seconds."""
    worker = WorkerThread(make_spec(redis_url, q.name))
    try:
        began = time.monotonic()
        job = q.add("test.sleep", {"s": 0.3})
        wait_until(lambda: q.get_job_state(job.id).value == "completed")
        watched_s = time.monotonic() - began  # the attempt lasted no longer
    finally:
        worker.stop()
    url = reverse("bullpen:job", args=["bull", q.name, job.id])
    page = viewer_client.get(url).content.decode()
    total = re.search(r'data-field="gpu_seconds"[^>]*>([0-9.]+) GPU-seconds', page)
    # The page shows tenths (floatformat:1, rounding half up): the value it
    # rounds lies within 0.05 of what it shows, and no higher than watched.
    assert total is not None and 0.3 <= float(total.group(1))
    assert float(total.group(1)) - 0.05 < watched_s
    cell = re.search(
        r'<td class="num nowrap" data-field="gpu_seconds">([0-9.]+)<', page
    )
    assert cell is not None and cell.group(1) == total.group(1)


def test_seven_days_by_hour_reads_whole_days(
    viewer_client: Client, dashboard_redis: str
) -> None:
    """Hours over more than a day come from whole UTC days: each key's sum
    from the day hashes, each hour's total from its one-key `all` hash; the
    figures are those of the hours, an attempt across midnight included."""
    now = time.time()
    midnight = now - now % 86400
    record(
        dashboard_redis,
        Usage(
            "bull:render", "sdxl", "acme", midnight - 1800, midnight + 600, GiB, False
        ),
        Usage(
            "bull:embed", "e5", "-", now - 3 * 86400, now - 3 * 86400 + 40, GiB, False
        ),
    )
    page = viewer_client.get("/gpu-time/?range=7d&by=hour").content.decode()
    found = rows(page)
    assert found["bull:render"]["gpu_seconds"] == "2400.0"
    assert found["bull:embed"]["gpu_seconds"] == "40.0"
    assert (
        found["total"]["gpu_seconds"] == "2440.0" and found["total"]["attempts"] == "2"
    )
    view = gpu_time(Choice.parse({"range": "7d", "by": "hour"}))
    hours = {int(b.start.timestamp()): b.total.gpu_seconds for b in view.buckets}
    start = int(midnight)
    assert (hours[start - 3600], hours[start]) == (1800.0, 600.0)
    assert len(hours) > 6 * 24  # every hour of the days the range touches
