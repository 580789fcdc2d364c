"""The GPU page, the overview and /metrics at fleet size (issue 26): they read
the process's fleet snapshot, so a request's Redis commands do not grow with
the fleet; the page draws a summary, a grid's data, filters and one page of
hosts' cards, so its HTML stays small; /metrics labels a bounded number of
GPUs and counts the whole fleet in aggregates."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from django.test import Client

import queues.discovery
from dashboard.console import reads
from dashboard.console.reads import overview
from dashboard.console.reads.fleet_page import HOSTS_PER_PAGE
from queues import Queue, ops
from tests.gpu_workers.fleet_records import gpu_uuid, host_name, publish_fleet

pytestmark = pytest.mark.django_db

PAGES = ("/gpus/", "/", "/metrics", "/gpus/grid.json")


def commands(r: redis.Redis) -> int:
    """Commands the server ran, less the INFO calls that ask."""
    stats = r.info("commandstats")
    return sum(
        int(v["calls"])
        for k, v in stats.items()
        if k.startswith("cmdstat_") and k != "cmdstat_info"
    )


def cost(client: Client, r: redis.Redis, path: str) -> int:
    """Redis commands one request of `path` makes, once the snapshot is held."""
    assert client.get(path).status_code == 200  # warm: snapshot, discovery
    before = commands(r)
    response = client.get(path)
    assert response.status_code == 200, path
    return commands(r) - before


@pytest.fixture
def held(settings: Any, dashboard_redis: str) -> str:
    """A snapshot kept for the test's length: what a request costs past it."""
    settings.BULLPEN_FLEET_MAX_AGE_S = 600
    settings.BULLPEN_DISCOVERY_TTL_S = 600
    reads.reset()
    return dashboard_redis


@pytest.fixture
def timers_stopped(held: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Nothing refreshes on a timer between two requests: the queue discovery
    and the worker census are kept (each rescans after a few ms or seconds),
    and the pages' wall clock stands still outside a minute's first
    SETTLE_MS (there the overview counts the minute before too, a ZCOUNT per
    queue and finished state more). What is left of a request's cost is
    what it reads for the fleet."""
    monkeypatch.setattr(queues.discovery, "TTL_PER_SCAN", 10**9)
    monkeypatch.setattr(overview, "WORKER_CENSUS_MAX_AGE_S", 600)
    now = ops.now_ms()
    if now % overview.MINUTE_MS < overview.SETTLE_MS + 5_000:
        now -= now % overview.MINUTE_MS + 1  # the previous minute's last ms
    monkeypatch.setattr(ops, "now_ms", lambda: now)
    return held


def test_request_cost_is_flat_from_8_to_512_gpus(
    timers_stopped: str, r: redis.Redis, admin_client: Client
) -> None:
    """The same Redis commands per request at 32 and at 512 published GPUs
    (GPU page, overview, /metrics, grid; the grid none at all); at 8 GPUs
    (one host) at most the desired counts of the page's other hosts fewer."""
    for name in ("gpu0", "gpu1"):
        Queue(name, r).add("render", {"i": 1})
    found = {}
    for gpus in (8, 32, 512):
        r.delete("bullpen:hosts", "bullpen:workers")
        publish_fleet(r, gpus // 8)
        reads.reset()
        found[gpus] = {path: cost(admin_client, r, path) for path in PAGES}
    for path in PAGES:
        assert found[512][path] == found[32][path], found
        assert found[512][path] <= found[8][path] + HOSTS_PER_PAGE, found
    assert found[512]["/gpus/grid.json"] == 0


def test_page_at_512_gpus_is_a_page_of_hosts(
    held: str, r: redis.Redis, admin_client: Client
) -> None:
    """At 512 GPUs: the summary counts all of them, the cards are the first
    HOSTS_PER_PAGE hosts', the HTML stays under 200 kB; the grid's JSON has a
    cell per GPU, under 80 bytes each."""
    publish_fleet(r, 64)
    html = admin_client.get("/gpus/").content.decode()
    assert len(html) < 200_000
    assert html.count('class="panel gpu-host"') == HOSTS_PER_PAGE
    assert html.count('<article class="panel gpu"') == HOSTS_PER_PAGE * 8
    assert 'data-summary="gpus">512<' in html and 'data-summary="busy">256<' in html
    assert 'data-summary="down">16<' in html and 'data-summary="idle">240<' in html
    assert "Hosts 1 of 16 pages" in html and 'rel="next"' in html
    grid = admin_client.get("/gpus/grid.json")
    data = json.loads(grid.content)
    assert len(data["cells"]) == 512 and data["match"] is None
    assert len(grid.content) < 512 * 80
    second = admin_client.get("/gpus/?page=2").content.decode()
    assert f'data-host="{host_name(4)}"' in second
    assert f'data-host="{host_name(0)}"' not in second


def test_filters_choose_the_cards_and_the_grid_marks_them(
    held: str, r: redis.Redis, admin_client: Client
) -> None:
    """Host, queue, model, state and GPU filters (query parameters, checked):
    only matching GPUs get cards; grid.json names them in `match`; odd
    values read as no filter, never an error."""
    publish_fleet(r, 16)
    down = admin_client.get("/gpus/?state=down").content.decode()
    assert down.count('<article class="panel gpu"') == HOSTS_PER_PAGE
    assert f'data-gpu="{gpu_uuid(3, 0)}"' in down
    host = admin_client.get(f"/gpus/?host={host_name(5)}").content.decode()
    assert host.count('class="panel gpu-host"') == 1
    assert host.count('<article class="panel gpu"') == 8
    one = admin_client.get(f"/gpus/?host={host_name(5)}&gpu={gpu_uuid(5, 2)}")
    assert one.content.decode().count('<article class="panel gpu"') == 1
    queue = admin_client.get("/gpus/?queue=bull:gpu1&model=llama").content.decode()
    assert queue.count('<article class="panel gpu"') == HOSTS_PER_PAGE * 4
    assert 'data-summary="gpus">128<' in queue  # the summary is the fleet's
    grid = json.loads(admin_client.get("/gpus/grid.json?state=down").content)
    assert sorted(grid["cells"][i][2] for i in grid["match"]) == sorted(
        gpu_uuid(h, 0) for h in (3, 7, 11, 15)
    )
    for odd in ("state=nope", "page=-3", "page=x", "host=" + "h" * 5000):
        assert admin_client.get("/gpus/?" + odd).status_code == 200
    none = admin_client.get("/gpus/?host=nowhere").content.decode()
    assert "No GPU matches these filters" in none


def test_metrics_label_a_bounded_number_of_gpus(
    held: str, settings: Any, r: redis.Redis, admin_client: Client
) -> None:
    """Past BULLPEN_METRICS_TOP_GPUS, GPU and worker series exist for that
    many GPUs, those an alert may be about first (a failed worker's GPU);
    the fleet families count every GPU."""
    settings.BULLPEN_METRICS_TOP_GPUS = 16
    reads.reset()
    publish_fleet(r, 16)  # 128 GPUs, GPU 0 of hosts 3, 7, 11, 15 failed
    text = admin_client.get("/metrics").content.decode()
    lines = text.splitlines()
    totals = [x for x in lines if x.startswith("bullpen_gpu_memory_total_bytes{")]
    assert len(totals) == 16
    for h in (3, 7, 11, 15):
        assert f'gpu="{gpu_uuid(h, 0)}"' in "\n".join(totals)
    failed = [
        x
        for x in lines
        if x.startswith("bullpen_worker_state{") and 'state="failed"' in x
    ]
    assert len(failed) == 16 and sum(x.endswith(" 1.0") for x in failed) == 4
    assert 'bullpen_fleet_gpus{state="busy"} 64.0' in lines
    assert 'bullpen_fleet_gpus{state="down"} 4.0' in lines
    assert "bullpen_fleet_gpus_labelled 16.0" in lines
    assert 'bullpen_fleet_workers{queue="bull:gpu0",state="failed"} 4.0' in lines
