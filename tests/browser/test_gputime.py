"""The GPU time page in Debian's Chromium: what the workers' recorder stored
is what the table shows, its links switch the grouping, the share bars get
their widths (bars.js, no style attributes), the CSV link downloads the same
range, and the page fits a phone in light and dark themes with no
Content-Security-Policy violation (screenshots `gpu-time-*`)."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from gpu_workers.gputime import OTHER, Usage
from tests.dashboard.test_gputime import record

from .conftest import Stack, shot
from .test_csp import VIOLATION_SIGNS, _watch
from .test_redis_panel import DESKTOP, PHONE, _logged_in

GiB = 2**30
JOBS = [
    # queue, job name, tenant, seconds, VRAM GiB, hours ago
    ("bull:render", "sdxl-1024", "acme-prod", 1800, 18, 1),
    ("bull:render", "sdxl-1024", "acme-prod", 2400, 18, 3),
    ("bull:render", "upscale-4x", "studio-b", 900, 6, 2),
    ("bull:embed", "embed-batch", "search-team", 3000, 3, 5),
    ("bull:video", "video-interp", "studio-b", 3500, 40, 8),
    ("bull:render", "a-very-long-job-name-from-a-node-client-" * 2, "-", 120, 2, 12),
    ("bull:render", "sim-check", "-", 60, 1, 0),
    # Five names in this hour: past the cap of four, the fifth is "(other)".
    *(("bull:embed", f"probe-{c}", "-", 20, 1, 0) for c in "abcd"),
]


def _fill(url: str) -> None:
    now = time.time()
    usages = []
    for queue, name, tenant, seconds, gib, ago in JOBS:
        end = now - ago * 3600
        sim = name == "sim-check"
        usages.append(Usage(queue, name, tenant, end - seconds, end, gib * GiB, sim))
    # Playwright's sync API runs an event loop in this thread: record in another.
    thread = threading.Thread(
        target=record, args=(url, *usages), kwargs={"max_keys": 4}
    )
    thread.start()
    thread.join(10)


def test_gpu_time_page(browser: Any, stack: Stack) -> None:
    """Rows by queue then tenant, bars sized, CSV, phone and dark mode."""
    r = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    for key in r.scan_iter("bullpen:{gputime}:*"):
        r.delete(key)
    _fill(stack.redis_url)
    with _logged_in(browser, stack) as pg:
        seen = _watch(pg)
        pg.goto(stack.url + "/gpus/")
        pg.locator("[data-link=gpu-time]").click()
        pg.wait_for_selector("#gpu-time-summary")
        keys = pg.locator("#gpu-time-summary tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.key)"
        )
        assert keys == ["bull:render", "bull:video", "bull:embed"]
        width = pg.locator("#gpu-time-summary tbody tr .bar > span").first
        assert width.evaluate("el => el.style.width").endswith("%")
        pg.locator(".gt-choice a", has_text="tenant").click()
        pg.wait_for_selector("table.gputime[data-group=tenant]")
        tenant_keys = pg.locator("#gpu-time-summary tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.key)"
        )
        assert tenant_keys[:2] == ["studio-b", "acme-prod"] and "-" in tenant_keys
        with pg.expect_download() as download:
            pg.locator("[data-csv]").click()
        text = open(download.value.path()).read()
        assert text.startswith("bucket_start_utc,period,tenant,")
        assert "acme-prod" in text
        pg.goto(stack.url + "/gpu-time/?group=name&range=24h")
        names = pg.locator("#gpu-time-summary tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.key)"
        )
        assert OTHER in names
        for theme in ("light", "dark"):
            pg.emulate_media(color_scheme=theme)
            for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
                pg.set_viewport_size(viewport)
                pg.goto(stack.url + "/gpu-time/?group=queue&range=24h")
                pg.wait_for_load_state("networkidle")
                overflow = pg.evaluate(
                    "document.documentElement.scrollWidth - innerWidth"
                )
                assert overflow <= 0, (theme, label, overflow)
                shot(pg, f"gpu-time-{theme}-{label}")
        blocked = [m for m in seen if any(sign in m for sign in VIOLATION_SIGNS)]
        assert not blocked
