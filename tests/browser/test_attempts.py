"""A job's Attempts table in Debian's Chromium against the real stack: a job
a real worker failed twice then completed shows three rows, in light and
dark, on a desktop and on a phone (the table scrolls inside its panel)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from queues import Job, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread

from .conftest import Stack, shot

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def _flaky(job: Job[Any]) -> str:
    if job.attempts_made < 2:
        raise RuntimeError(f"model not loaded (attempt {job.attempts_made + 1})")
    return "ok"


def test_attempts_table_in_both_themes(page: Any, stack: Stack) -> None:
    """Rows 1 and 2 retried with their errors, row 3 completed, each with
    its worker; the page does not overflow a phone's width."""
    q = Queue("at-flaky", stack.redis_url)
    job = q.add("render", {"prompt": "a cat"}, attempts=3)
    with worker_thread(q.name, _flaky, stack.redis_url, worker_name="browser-w"):
        wait_until(lambda: q.get_job_state(job.id).value == "completed", 10)
    page.goto(stack.url + reverse("bullpen:job", args=[q.prefix, q.name, job.id]))
    rows = page.locator("#attempts tr[data-attempt]")
    rows.nth(2).wait_for()
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    assert len(texts) == 3
    assert "retried" in texts[0] and "model not loaded (attempt 1)" in texts[0]
    assert "retried" in texts[1] and "(attempt 2)" in texts[1]
    assert "completed" in texts[2] and "browser-w" in texts[2]
    for theme in ("light", "dark"):
        page.emulate_media(color_scheme=theme)
        for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(viewport)
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - innerWidth"
            )
            assert overflow <= 0, (theme, label, overflow)
            page.locator("#attempts").scroll_into_view_if_needed()
            shot(page, f"attempts-{theme}-{label}")
