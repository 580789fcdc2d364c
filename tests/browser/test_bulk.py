"""Lists you can act on, in Debian's Chromium: 2,000 failed jobs, select the
page, then "select all 2000 matching", Retry: the batch's progress bar shows
on the queue page, ends at 2000 of 2000, the jobs are waiting, and the audit
log holds exactly one row for the batch, with its final counts."""

from __future__ import annotations

from typing import Any

import redis
from django.urls import reverse

from queues import Queue
from tests.dashboard.helpers import run_jobs

from .conftest import Stack, shot
from .test_csp import VIOLATION_SIGNS, _watch

N = 2_000


def test_select_all_matching_retry_of_2000_failed(page: Any, stack: Stack) -> None:
    """Select page → banner → select all N matching → Retry (confirmed):
    a running or finished progress bar, then done with N retried and one
    audit row; no Content-Security-Policy complaint on the console."""
    seen = _watch(page)
    q = Queue("bulkretry", stack.redis_url)
    try:
        run_jobs(q, N, "failed")
        url = stack.url + reverse("bullpen:queue", args=["bull", "bulkretry"])
        page.goto(url + "?state=failed")
        assert page.locator("#batch .bar").count() == 0
        retry = page.locator("[data-bulk-verb=retry]")
        assert retry.is_disabled()
        page.locator("[data-select-page]").check()
        assert page.locator("tr.selected").count() == 25
        assert page.locator("[data-bulk-count]").inner_text() == "25 selected"
        banner = page.locator("[data-bulk-banner]")
        banner.wait_for()
        assert "All 25 jobs on this page are selected" in banner.inner_text()
        page.locator("[data-bulk-all]").click()
        assert page.locator("[data-bulk-count]").inner_text() == (
            f"all {N} matching selected"
        )
        assert f"All {N} failed jobs are selected" in banner.inner_text()
        assert page.locator("[data-bulk-verb=promote]").count() == 0
        page.once("dialog", lambda dialog: dialog.accept())
        retry.click()
        bar = page.locator("#batch .bar[role=progressbar]")
        bar.wait_for()  # the progress fragment appears at once
        page.locator("#batch [data-batch-status=done]").wait_for(timeout=60_000)
        counts = page.locator("#batch [data-batch-counts]").inner_text()
        assert f"{N} of {N} · {N} done · 0 skipped · 0 errors" in counts
        assert bar.get_attribute("aria-valuenow") == str(N)
        assert bar.locator("span").evaluate("el => el.style.width") == "100%"
        assert q.get_counts("failed", "waiting") == {"failed": 0, "waiting": N}
        page.goto(stack.url + reverse("bullpen:audit") + "?action=batch.")
        rows = page.locator("table tbody tr")
        assert rows.count() == 1
        text = rows.first.inner_text()
        assert "batch.retry" in text and f"{N} done, 0 skipped" in text
        shot(page, "bulk-audit")
    finally:
        redis.Redis.from_url(stack.redis_url).delete(
            *[f"bull:bulkretry:{k}" for k in ("wait", "failed", "meta", "events")]
        )
        q.close()
    assert not [m for m in seen if any(s in m for s in VIOLATION_SIGNS)], seen
