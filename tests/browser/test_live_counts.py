"""Counts that must follow live, in Debian's Chromium without a reload: the
queue page's "latest" tab (the sum of every state) and the GPU page's
Running column after scaling."""

from __future__ import annotations

from typing import Any

from queues import Queue

from .conftest import Stack, shot
from .test_dashboard_live import _poll


def test_latest_tab_count_follows_live(page: Any, stack: Stack) -> None:
    """Jobs added to a queue raise its "latest" tab count without a reload."""
    q = Queue("latest-tab", stack.redis_url)  # no worker serves it
    q.add("x", {})
    page.goto(stack.url + "/queues/bull/latest-tab/")
    page.wait_for_selector("body[data-live-status=open]")
    latest = page.locator('a[href^="?state=latest"] .count')
    assert latest.inner_text() == "1"
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    q.add_bulk([{"name": "x", "data": {"i": i}} for i in range(3)])
    _poll(lambda: latest.inner_text(), lambda n: n == "4", 15, "latest tab count")
    assert (
        page.locator('[data-live-count="bull:latest-tab:waiting"]').inner_text() == "4"
    )
    assert navigations == [], "the page reloaded"
    shot(page, "latest-tab")


def test_running_column_follows_scaling(page: Any, stack: Stack) -> None:
    """After each Apply (twice on one page), the scaling table's Running
    column reaches the new number of workers once the supervisor has
    converged, without a reload."""
    page.goto(stack.url + "/gpus/")
    row = page.locator("tr[data-scale]").first
    row.wait_for(timeout=30_000)
    assert page.locator("#gpu-scale th").nth(2).text_content() == "Running"
    running = row.locator("td").nth(2)
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))

    def scale_to(want: str) -> None:
        row.locator("input[name=workers]").fill(want)
        row.get_by_role("button", name="Apply").click()
        # Each Apply answers in the flash area (a form here once replaced
        # that area with nothing, and a second Apply then did nothing).
        page.locator("#flash", has_text=f"workers {want}").wait_for()
        _poll(lambda: running.inner_text(), lambda n: n == want, 30, "Running")

    first = "1" if running.inner_text() != "1" else "2"
    scale_to(first)
    scale_to("2" if first == "1" else "1")
    assert navigations == [], "the page reloaded"
    shot(page, "gpus-running")
