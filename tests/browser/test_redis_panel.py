"""The Redis page and the workers page in Debian's Chromium: the numbers the
browser shows are the stack's Redis INFO, the memory warning appears when
maxmemory is set so that use passes 80% of it, and both pages fit a phone's
width in light and dark themes (screenshots `redis-*` and `workers-*`)."""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from django.urls import reverse

from tests.queues.worker.helpers import worker_thread

from .conftest import Stack, logged_in_page, shot
from .test_csp import VIOLATION_SIGNS, _watch

#: INFO fields that do not move while the page loads; a counter that only
#: grows, so it lies between what INFO said just before and just after; and
#: fields that go up and down with the stack's own work (its workers,
#: samplers): they lie within what INFO said while the page loaded, sampled
#: every millisecond or so (a fresh clone's run once saw used_memory peak
#: between a before and an after that were both lower), give or take the
#: most they moved from one sample to the next.
STABLE = ("redis_version", "maxmemory", "maxmemory_policy", "rdb_last_bgsave_status")
GROWING = ("total_commands_processed",)
MOVING = ("used_memory", "connected_clients")
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def shown(page: Any, scope: str = "") -> dict[str, str]:
    """The text of every `[data-field]` element (the first of each name)."""
    found: dict[str, str] = page.eval_on_selector_all(
        f"{scope} [data-field]".strip(),
        """els => { const out = {};
           for (const e of els) { const k = e.dataset.field;
             if (!(k in out)) out[k] = e.textContent.trim(); }
           return out; }""",
    )
    return found


@contextmanager
def sampled_info(url: str, fields: tuple[str, ...]) -> Iterator[dict[str, list[int]]]:
    """INFO read again and again on a connection of its own while the block
    runs: every value each of `fields` took (its own connection counts in
    connected_clients, as the page's read does)."""
    seen: dict[str, list[int]] = {f: [] for f in fields}
    stop = threading.Event()
    client = redis.Redis.from_url(url, decode_responses=True)

    def sample() -> None:
        while True:
            info = client.info()
            for f in fields:
                seen[f].append(int(info[f]))
            if stop.wait(0.001):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        while not all(seen.values()):  # one sample at least before the block
            time.sleep(0.001)
        yield seen
    finally:
        stop.set()
        sampler.join(10)
        client.close()


def moved(values: list[int]) -> tuple[int, int, int]:
    """The lowest and highest of a field's samples, and the most it moved
    between two samples in a row: the page's own read falls between two
    samples, so it may pass the range by as much as the field can move in
    that time (CI once saw used_memory 32 bytes above a 38 KB range)."""
    step = max((abs(b - a) for a, b in zip(values, values[1:])), default=0)
    return min(values), max(values), step


def test_redis_panel_numbers_equal_info(page: Any, stack: Stack) -> None:
    """Every number of the panel is the one INFO gives; a maxmemory that use
    passes 80% of shows the warning, and it goes once the limit is lifted."""
    r = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    url = stack.url + reverse("bullpen:redis")
    page.goto(url)  # the dashboard's client connects once, first
    with sampled_info(stack.redis_url, MOVING) as seen:
        before = r.info()
        page.goto(url)
        page.wait_for_selector("section.redis-server")
        after = r.info()
    values = shown(page)
    assert values["mode"] == "single"
    for name in STABLE:
        assert values[name] == str(after[name]), name
    for name in GROWING:
        low, high = sorted((before[name], after[name]))
        assert low <= int(values[name]) <= high, (name, before[name], after[name])
    for name in MOVING:
        low, high, step = moved(seen[name])
        value = int(values[name])
        where = (name, low, high, step, len(seen[name]))
        assert low - step <= value <= high + step, where
    assert values["dbsize"] == str(r.dbsize())
    assert page.locator("[data-warning=memory]").count() == 0
    try:
        r.config_set("maxmemory", int(r.info("memory")["used_memory"] / 0.85))
        page.goto(url)
        page.locator("[data-warning=memory]").wait_for()
        assert shown(page)["maxmemory"] == r.config_get("maxmemory")["maxmemory"]
        used = page.locator("text=/\\d+% used/").first.inner_text()
        pct = re.search(r"(\d+)% used", used).group(1)  # type: ignore[union-attr]
        bar = page.locator(".bar.mem > span")
        assert bar.evaluate("el => el.style.width") == f"{pct}%"  # bars.js, no style=
        shot(page, "redis-memory-warning")
    finally:
        r.config_set("maxmemory", 0)
    page.goto(url)
    assert page.locator("[data-warning=memory]").count() == 0


@contextmanager
def _logged_in(browser: Any, stack: Stack, **options: Any) -> Iterator[Any]:
    pg = logged_in_page(browser, stack.url, **options)
    try:
        yield pg
    finally:
        pg.context.close()


def _node_worker(stack: Stack) -> Any:
    """A Node BullMQ worker on `render` when node is here (else None)."""
    if not shutil.which("node"):
        return None
    from tests.interop.helpers import node_worker

    return node_worker(stack.redis_url, "render", name="node-render-1")


def _check_and_shoot(pg: Any, stack: Stack, name: str, label: str) -> None:
    """Open one page, wait for what it must show, check that it does not
    overflow the viewport's width, and take its screenshot."""
    pg.goto(stack.url + reverse(f"bullpen:{name}"))
    pg.wait_for_load_state("networkidle")
    if name == "workers":
        # It follows the GPU workers' stream: its list re-renders on changes.
        pg.wait_for_selector("body[data-live-status=open]")
        pg.locator('[data-worker="py-render-1"]').wait_for()
        pg.locator('[data-kind="Bullpen GPU worker"]').first.wait_for()
        if shutil.which("node"):
            pg.locator('[data-worker="node-render-1"]').wait_for()
    else:
        pg.locator("[data-warning=policy]").wait_for()
        assert pg.locator("table.slowlog tr[data-slow-id]").count()
    overflow = pg.evaluate("document.documentElement.scrollWidth - innerWidth")
    assert overflow <= 0, (label, overflow)
    shot(pg, label)


def test_pages_fit_a_phone_in_both_themes(browser: Any, stack: Stack) -> None:
    """With a slowlog, warnings, and Node, Bullpen and GPU workers listed,
        both pages render in light and dark, on a desktop and on a phone whose
        width the page does not overflow (tables scroll inside their panel), with
    no Content-Security-Policy violation on the console."""
    r = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    seen: list[str] = []
    policy = r.config_get("maxmemory-policy")["maxmemory-policy"]
    slower = r.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    node = _node_worker(stack)
    try:
        r.config_set("slowlog-log-slower-than", 0)
        r.set("bull:render:demo", '{"prompt": "a cat", "steps": 30}' * 4)
        r.config_set("slowlog-log-slower-than", slower)
        r.config_set("maxmemory-policy", "allkeys-lru")
        with worker_thread("render", _noop, stack.redis_url, worker_name="py-render-1"):
            with _logged_in(browser, stack) as pg:
                seen = _watch(pg)
                for theme in ("light", "dark"):
                    pg.emulate_media(color_scheme=theme)
                    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
                        pg.set_viewport_size(viewport)
                        for name in ("redis", "workers"):
                            _check_and_shoot(pg, stack, name, f"{name}-{theme}-{label}")
        blocked = [m for m in seen if any(sign in m for sign in VIOLATION_SIGNS)]
        assert not blocked  # the Content-Security-Policy allowed everything
    finally:
        r.config_set("maxmemory-policy", policy)
        r.config_set("slowlog-log-slower-than", slower)
        if node is not None:
            node.kill()


def _noop(job: object) -> None:
    return None
