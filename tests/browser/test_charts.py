"""Charts over time in Debian's Chromium: the queue page's chart moves as a
worker finishes jobs, without a reload (the uPlot instance's data and the
section's data- attributes, read from the page); the queue page, overview and
GPU page draw their charts under the strict CSP in light and dark, on a
desktop and on a phone without overflowing it (screenshots `charts-*`, also
copied to /work/shots/charts/ when that folder exists)."""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Any

import redis
from django.urls import reverse

from gpu_workers.keys import BullpenKeys
from gpu_workers.series import points, store
from queues import Queue
from tests.queues.worker.helpers import worker_thread

from .conftest import Stack, logged_in_page, shot
from .test_csp import VIOLATION_SIGNS, _watch

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
SHOTS = Path("/work/shots/charts")
MIN = 60_000


def _seed_history(r: redis.Redis, queue: str) -> None:
    """An hour of minute points before now for `queue` and the stack's GPUs,
    as samplers would have written them (so screenshots show curves)."""
    keys, rnd = BullpenKeys(), random.Random(7)
    now = int(time.time() * 1000)
    start = now - now % MIN - 60 * MIN
    minutes = []
    for i in range(58):
        busy = 20 + 15 * ((i // 10) % 2)
        minutes.append(
            {
                "t": start + i * MIN,
                "m": 1,
                "c": busy + rnd.randint(0, 8),
                "f": rnd.choice((0, 0, 1, 2)),
                "n": busy,
                "w50": round(0.5 + rnd.random(), 2),
                "w95": round(3 + 4 * rnd.random(), 2),
                "r50": round(1 + rnd.random(), 2),
                "r95": round(2.5 + 2 * rnd.random(), 2),
                "b": 40 + 30 * ((i // 10) % 2) + rnd.randint(0, 10),
                "a": rnd.randint(2, 6),
                "o": round(5 + 20 * rnd.random(), 1),
            }
        )
    store.write(
        r,
        [(lambda lv: keys.series("bull", queue, lv), p) for p in minutes],
        points.over_time,
        now,
    )


def _wait_loaded(pg: Any, more_than: int = 0) -> None:
    pg.wait_for_function(
        f"() => +(document.querySelector('[data-charts]')"
        f".getAttribute('data-charts-loads') || 0) > {more_than}"
    )


def test_queue_chart_moves_as_jobs_finish(page: Any, stack: Stack) -> None:
    """Jobs finishing raise the open minute's completed count on the queue
    page's chart, in its uPlot data, without the page reloading."""
    q = Queue("charted", stack.redis_url)
    try:
        q.add("warm-up", {})
        page.goto(stack.url + reverse("bullpen:queue", args=["bull", "charted"]))
        page.wait_for_selector("body[data-live-status=open]")
        _wait_loaded(page)
        page.evaluate("window.__notReloaded = true")
        before = float(
            page.locator("[data-charts]").get_attribute("data-charts-completed")
        )
        assert before == 0
        for i in range(5):
            q.add("job", {"i": i})
        with worker_thread("charted", lambda job: None, stack.redis_url):
            page.wait_for_function(
                "() => +document.querySelector('[data-charts]')"
                ".getAttribute('data-charts-completed') >= 6",
                timeout=20_000,
            )
        plotted = page.evaluate(
            """() => {
              const u = document.querySelector('[data-charts]').bullpenCharts[0];
              return u.data[1].slice(-2).reduce((a, v) => a + (v || 0), 0); }"""
        )
        assert plotted >= 6
        assert page.evaluate("window.__notReloaded") is True
    finally:
        q.close()


def test_charts_in_both_themes_on_desktop_and_phone(browser: Any, stack: Stack) -> None:
    """Every chart section draws (5 queue charts, 2 GPU charts with a line per
    simulated GPU) with no CSP violation and no horizontal overflow."""
    r = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    _seed_history(r, "charted")
    with Queue("charted", stack.redis_url) as q:
        q.add("waits", {})  # the queue exists whichever test runs first
    pg = logged_in_page(browser, stack.url, viewport=DESKTOP)
    context = pg.context
    seen = _watch(pg)
    pages = {
        "queue": reverse("bullpen:queue", args=["bull", "charted"]),
        "overview": reverse("bullpen:overview"),
        "gpus": reverse("bullpen:gpus"),
    }
    try:
        for theme in ("light", "dark"):
            pg.emulate_media(color_scheme=theme)
            for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
                pg.set_viewport_size(viewport)
                for name, path in pages.items():
                    pg.goto(stack.url + path)
                    _wait_loaded(pg)
                    want = 2 if name == "gpus" else 5
                    assert pg.locator(".chart .uplot").count() == want
                    if name == "gpus":
                        pg.wait_for_function(
                            "() => document.querySelector('[data-charts]')"
                            ".bullpenCharts[0].series.length >= 3"
                        )  # x plus one line per simulated GPU
                    overflow = pg.evaluate(
                        "document.documentElement.scrollWidth - innerWidth"
                    )
                    assert overflow <= 0, (name, theme, label, overflow)
                    path_png = shot(pg, f"charts-{name}-{theme}-{label}")
                    if SHOTS.is_dir():
                        shutil.copy(path_png, SHOTS / path_png.name)
        blocked = [m for m in seen if any(sign in m for sign in VIOLATION_SIGNS)]
        assert not blocked
    finally:
        context.close()
