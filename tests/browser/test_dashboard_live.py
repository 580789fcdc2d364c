"""The dashboard as an operator sees it, in Debian's Chromium: live counts and
progress without reload, retrying a failed job, scaling GPU workers, and the
committed-VRAM gauge. Screenshots go to tests/browser/artifacts/."""

from __future__ import annotations

import re
import time
from typing import Any

from queues import Queue

from .conftest import Stack, shot


def _poll(read: Any, ok: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    value = read()
    while not ok(value):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: last value {value!r}")
        time.sleep(0.2)
        value = read()
    return value


def _width(page: Any, key: str) -> float:
    style = (
        page.locator(f'[data-live-progress="{key}"] span').first.get_attribute("style")
        or ""
    )
    found = re.search(r"width:\s*([\d.]+)%", style)
    return float(found.group(1)) if found else 0.0


def test_overview_counts_change_live(page: Any, stack: Stack) -> None:
    """After login the overview lists the queue, and its completed count grows
    while jobs run, without a reload."""
    q = Queue("gpu", stack.redis_url)
    q.add("demo", {"vram": "1GiB", "steps": 2, "step_s": 0.05})
    page.goto(stack.url + "/")
    cell = page.locator('[data-live-count="bull:gpu:completed"]').first
    cell.wait_for()
    start = int(cell.inner_text() or 0)
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    q.add_bulk(
        [
            {"name": "demo", "data": {"vram": "1GiB", "steps": 2, "step_s": 0.05}}
            for _ in range(6)
        ]
    )
    _poll(
        lambda: int(cell.inner_text() or 0),
        lambda n: n >= start + 6,
        30,
        "completed count on the overview",
    )
    assert navigations == [], "the page reloaded"
    shot(page, "overview")


def test_progress_bar_moves_without_reload(page: Any, stack: Stack) -> None:
    """A running job's progress bar on its page advances as the job reports."""
    q = Queue("gpu", stack.redis_url)
    job = q.add("demo", {"vram": "2GiB", "steps": 25, "step_s": 0.25})
    page.goto(f"{stack.url}/queues/bull/gpu/jobs/{job.id}/")
    key = f"bull:gpu:{job.id}"
    page.locator(f'[data-live-progress="{key}"]').first.wait_for()
    first = _poll(lambda: _width(page, key), lambda w: w > 0, 30, "progress starts")
    _poll(lambda: _width(page, key), lambda w: w >= first + 20, 30, "progress advances")
    shot(page, "job")


def test_retry_failed_job_leaves_failed_tab(page: Any, stack: Stack) -> None:
    """Retrying a failed job from its page takes it out of the failed tab."""
    q = Queue("gpu", stack.redis_url)
    job = q.add(
        "demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01, "fail": True}, attempts=1
    )
    _poll(
        lambda: q.get_job_state(job.id).value, lambda s: s == "failed", 30, "job fails"
    )
    page.goto(f"{stack.url}/queues/bull/gpu/?state=failed")
    row = page.locator(f'tr[data-job="bull:gpu:{job.id}"]')
    row.wait_for()
    shot(page, "queue")
    # Paused, so the retried job waits instead of failing again at once.
    q.pause()
    try:
        page.goto(f"{stack.url}/queues/bull/gpu/jobs/{job.id}/")
        page.get_by_role("button", name=re.compile(r"^Retry", re.I)).first.click()
        _poll(
            lambda: q.get_job_state(job.id).value,
            lambda s: s == "waiting",
            15,
            "job back in wait",
        )
        page.goto(f"{stack.url}/queues/bull/gpu/?state=failed")
        page.locator("main").wait_for()
        assert page.locator(f'tr[data-job="bull:gpu:{job.id}"]').count() == 0
    finally:
        q.resume()


def test_scale_workers_and_committed_gauge(page: Any, stack: Stack) -> None:
    """Scaling 1 -> 2 workers shows the second one; a running job's declared
    VRAM shows as committed on a GPU gauge."""
    page.goto(stack.url + "/gpus/")
    form_row = page.locator("tr[data-scale]").first
    form_row.wait_for(timeout=30_000)
    workers = page.locator(".gpu-worker[data-worker]")

    def apply(n: int) -> None:
        form_row.locator("input[name=workers]").fill(str(n))
        form_row.get_by_role("button", name="Apply").click()

    apply(1)
    _poll(
        lambda: (page.reload(), workers.count())[1], lambda n: n == 1, 30, "one worker"
    )
    apply(2)
    _poll(
        lambda: (page.reload(), workers.count())[1],
        lambda n: n == 2,
        30,
        "second worker appears",
    )
    q = Queue("gpu", stack.redis_url)
    q.add("demo", {"vram": "10GiB", "steps": 60, "step_s": 0.25})

    def committed() -> float:
        page.reload()
        widths = []
        for el in page.locator(".committed").all():
            m = re.search(r"width:\s*([\d.]+)%", el.get_attribute("style") or "")
            widths.append(float(m.group(1)) if m else 0.0)
        return max(widths or [0.0])

    _poll(committed, lambda w: w > 20, 30, "committed VRAM on a gauge")
    shot(page, "gpus")
