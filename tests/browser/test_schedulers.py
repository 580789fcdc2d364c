"""The job schedulers page in Debian's Chromium: an operator edits a
scheduler's cron pattern in the page and sees its next run move to the new
pattern's slot, pauses one (it moves to the Paused list), with no
Content-Security-Policy violation; the page fits a phone's width in light and
dark themes (screenshots `schedulers-*`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from django.urls import reverse

from queues import Queue

from .conftest import Stack, shot
from .test_csp import VIOLATION_SIGNS, _watch

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def _next_ms(page: Any, sid: str) -> int:
    cell = page.locator(f'tr[data-scheduler="{sid}"] [data-field=next]')
    return int(cell.get_attribute("data-next-ms"))


def test_edit_pattern_moves_the_next_run(page: Any, stack: Stack) -> None:
    """Saving a new pattern in the row's Edit form reloads the page with the
    next run the queue core computes for it (minute 17, then minute 42)."""
    name = f"sched{uuid.uuid4().hex[:8]}"
    q = Queue(name, stack.redis_url)
    q.upsert_job_scheduler(
        "thumbs",
        cron="0 17 * * * *",
        tz="UTC",
        template={"name": "thumb", "data": {"size": 256}, "opts": {"attempts": 2}},
    )
    q.upsert_job_scheduler("tick", every_ms=30_000, template={"data": {"n": 1}})
    seen = _watch(page)
    page.goto(stack.url + reverse("bullpen:schedulers", args=["bull", name]))
    before = _next_ms(page, "thumbs")
    assert datetime.fromtimestamp(before / 1000, UTC).minute == 17
    row = page.locator('tr[data-scheduler="thumbs"]')
    row.locator("details.edit > summary").click()
    row.locator("input[name=pattern]").fill("0 42 * * * *")
    row.locator("details.edit button.primary").click()
    page.wait_for_function(
        """() => { const c = document.querySelector(
             'tr[data-scheduler="thumbs"] [data-field=next]');
           return c && c.dataset.nextMs !== arguments[0]; }""".replace(
            "arguments[0]", f'"{before}"'
        )
    )
    after = _next_ms(page, "thumbs")
    stored = q.get_job_scheduler("thumbs")
    assert stored is not None and stored.pattern == "0 42 * * * *"
    assert after == stored.next
    assert datetime.fromtimestamp(after / 1000, UTC).minute == 42
    shown = page.locator('tr[data-scheduler="thumbs"] [data-field=next]').inner_text()
    assert datetime.fromtimestamp(after / 1000, UTC).strftime("%H:%M:%S") in shown
    assert "edited scheduler thumbs" in page.locator("body").inner_text()
    q.upsert_job_scheduler("nightly", cron="0 30 2 * * *", tz="Europe/Paris")
    page.reload()
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator('tr[data-scheduler="nightly"] button:text("Pause")').click()
    page.locator('tr[data-paused="nightly"]').wait_for()
    assert q.get_job_scheduler("nightly") is None
    for theme in ("light", "dark"):
        page.emulate_media(color_scheme=theme)
        for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(viewport)
            page.reload()
            page.locator('tr[data-scheduler="tick"]').wait_for()
            if label == "desktop":
                page.locator("tr[data-scheduler=thumbs] details.edit > summary").click()
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - innerWidth"
            )
            assert overflow <= 0, (theme, label, overflow)
            shot(page, f"schedulers-{theme}-{label}")
    assert not [m for m in seen if any(sign in m for sign in VIOLATION_SIGNS)]
    q.close()
