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


def test_a_rows_change_priority_and_the_bars(page: Any, stack: Stack) -> None:
    """A waiting row's Change priority: its own fields (not the bar's, nor
    other rows') are sent, the job moves to prioritized; then the bar's
    Change priority on the selected rows sets its own value."""
    q = Queue("rowprio", stack.redis_url)
    try:
        ids = [q.add("w", {"i": i}).id for i in range(3)]
        url = stack.url + reverse("bullpen:queue", args=["bull", "rowprio"])
        page.goto(url + "?state=waiting")
        bar_field = page.locator("[data-bulk-bar] input[name=priority]")
        bar_field.fill("9")  # must not ride along with a row's request
        row = page.locator(f"tr[data-job='bull:rowprio:{ids[1]}']")
        row.locator("details.row-verb summary").click()
        row.locator("details.row-verb input[name=priority]").fill("4")
        row.locator("details.row-verb input[name=lifo]").check()
        row.locator("details.row-verb button").click()
        page.locator("#flash").get_by_text(
            f"set priority of job {ids[1]} to 4"
        ).wait_for()
        assert q.get_job(ids[1]).priority == 4
        assert q.get_job_state(ids[1]).value == "prioritized"
        page.goto(url + "?state=waiting")
        for job_id in (ids[0], ids[2]):
            page.locator(f"input[name=ids][value='{job_id}']").check()
        page.locator("[data-bulk-bar] input[name=priority]").fill("2")
        page.locator("[data-bulk-verb=priority]").click()
        page.locator("#flash").get_by_text("priority: 2 of 2").wait_for()
        assert [q.get_job(i).priority for i in (ids[0], ids[2])] == [2, 2]
    finally:
        q.obliterate(force=True)
        q.close()
