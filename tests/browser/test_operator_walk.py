"""What a new operator tripped over (issue 11, section 5), walked again in
Debian's Chromium against the real stack: GPU scaling confirms every Apply, a
mistyped queue is a "no such queue" page that writes nothing, the sparkline
draws both series on one scale, search runs with the defaults it opens with,
the internal webhook queue stands apart, long names stay on screen, and job
pages say when a delayed job runs, what a job waiting to retry is waiting
for, and attempts that stay true after a manual retry. Screenshots go to
tests/browser/artifacts/ (walk-*.png). Every walk runs on the standalone
site and on a host project that mounts the dashboard under /ops/queues/."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from dashboard.console.templatetags.bullpen import ms_short
from queues import Queue, ops
from tests.queues.transitions.helpers import (
    claimed,
    entry,
    move_to_active,
    move_to_delayed,
    move_to_finished,
)

from .conftest import HOST_PREFIX, PASSWORD, Stack, shot, start_stack

MINUTE_MS = 60_000
#: Height of the overview's sparkline (its viewBox).
SPARK_H = 24


@pytest.fixture(scope="module", params=["root", "mounted"])
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    """Every walk twice: on the standalone site at "/", and on the host
    project (tests/hostproject), which mounts the dashboard under /ops/queues/
    and serves its own home page at "/"."""
    yield from start_stack(mounted=request.param == "mounted")


def finish(q: Queue, n: int, target: str, reason: str = "boom") -> list[str]:
    """Add n jobs, claim them and finish them as `target`, as a worker does."""
    now = ops.now_ms()
    ids = [q.add("job", {"i": i}).id for i in range(n)]
    got = claimed(move_to_active(q, now=now, count=n))
    value = reason if target == "failed" else "null"
    move_to_finished(
        q, [entry(i, target, value=value, token=t) for i, t, _ in got], now=now + 5
    )
    return ids


def fail_once(q: Queue, job_id: str) -> None:
    """Claim the queue's next job (`job_id`) and fail its attempt for good."""
    now = ops.now_ms()
    [(got, token, _)] = claimed(move_to_active(q, now=now))
    assert got == job_id
    move_to_finished(q, [entry(got, "failed", value="boom", token=token)], now=now)


def reload_until(page: Any, url: str, selector: str, timeout_s: float = 20) -> Any:
    """Load `url` until `selector` is on it (queue discovery and supervisor
    heartbeats take a moment); returns its locator."""
    found = page.locator(selector)
    deadline = time.monotonic() + timeout_s
    while True:
        page.goto(url)
        if found.count():
            return found.first
        assert time.monotonic() < deadline, f"{selector} never showed on {url}"
        time.sleep(0.5)


def utc(ms: int) -> str:
    """Epoch ms as the pages write times."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def test_gpu_scaling_confirms_every_apply(page: Any, stack: Stack) -> None:
    """Each Apply on the GPU page shows its confirmation in #flash, which
    stays in place, so a second Apply on the same page is sent and
    confirmed too; the audit log names the action workers.scale."""
    reload_until(page, stack.url + "/gpus/", "#gpu-scale tr[data-scale]")
    flash = page.locator("#flash")
    for workers in ("1", "2"):
        # Marks the panel, which a successful Apply makes re-render: the next
        # Apply then fills the new form, not one about to be replaced.
        page.evaluate("document.querySelector('#gpu-scale').dataset.old = '1'")
        form = page.locator("#gpu-scale tr[data-scale] form").first
        form.locator("input[name=workers]").fill(workers)
        form.locator("button[type=submit]").click()
        flash.get_by_text(f"workers {workers}; the supervisor").wait_for()
        assert page.locator("#flash").count() == 1
        # A locator, not wait_for_function: the page's CSP forbids the eval
        # that Playwright's string predicates need.
        page.locator("#gpu-scale:not([data-old])").wait_for(state="attached")
    shot(page, "walk-gpu-after-apply")
    page.goto(stack.url + "/audit/")
    actions = page.locator("tbody tr td:nth-child(3)").all_inner_texts()
    assert actions[:2] == ["workers.scale", "workers.scale"]


def test_a_mistyped_queue_is_not_found_and_creates_nothing(
    page: Any, stack: Stack
) -> None:
    """A queue that is neither configured nor in Redis: our 404 page (not
    Django's debug page, though DEBUG is on) with no actions; a job URL under
    it and a missing job likewise; posting an action to it answers 404 and
    writes no key, and the overview never lists it."""
    known = Queue("walk-known", stack.redis_url)
    known.add("a", {})
    response = page.goto(stack.url + "/queues/bull/rendr/")
    assert response.status == 404
    assert page.title() == "Not found · Bullpen"
    assert "No such queue: bull:rendr" in page.locator("#not-found").inner_text()
    assert page.locator("form[action*='/actions/']").count() == 0
    shot(page, "walk-unknown-queue")
    for url, text in [
        ("/queues/bull/rendr/jobs/1/", "No such queue: bull:rendr"),
        ("/queues/bull/walk-known/jobs/999/", "job 999 is not in bull:walk-known"),
    ]:
        response = page.goto(stack.url + url)
        assert response.status == 404, url
        assert text in page.locator("#not-found").inner_text()
    status = page.evaluate(
        """async (url) => {
            const headers = JSON.parse(document.body.getAttribute('hx-headers'));
            const r = await fetch(url, {method: 'POST',
                                        headers: {...headers, 'HX-Request': 'true'}});
            return r.status;
        }""",
        stack.url + "/queues/bull/rendr/actions/pause/",
    )
    assert status == 404
    assert redis.Redis.from_url(stack.redis_url).keys("bull:rendr:*") == []
    reload_until(page, stack.url + "/", 'tr[data-queue="bull:walk-known"]')
    assert page.locator('tr[data-queue="bull:rendr"]').count() == 0


def _peak(points: str | None) -> float:
    """How high a sparkline polyline rises above its baseline."""
    assert points
    return SPARK_H - 1 - min(float(p.split(",")[1]) for p in points.split())


def test_sparkline_draws_completed_and_failed_on_one_scale(
    page: Any, stack: Stack
) -> None:
    """28 completions and one failure in the same minute: the failure line
    rises 1/28 as high as the completion line, not to the same spike."""
    q = Queue("walk-spark", stack.redis_url)
    finish(q, 28, "completed")
    finish(q, 1, "failed")
    row = reload_until(page, stack.url + "/", 'tr[data-queue="bull:walk-spark"]')
    done = _peak(row.locator("polyline.done").get_attribute("points"))
    failed = _peak(row.locator("polyline.failed").get_attribute("points"))
    assert done > SPARK_H - 4
    assert failed < done / 20
    shot(page, "walk-overview")


def test_search_runs_with_the_defaults_it_opens_with(page: Any, stack: Stack) -> None:
    """Opening search and pressing Search at once scans a queue instead of
    refusing its own defaults."""
    Queue("walk-search", stack.redis_url).add("a", {})
    page.goto(stack.url + "/search/")
    page.locator("form[role=search] button[type=submit]").click()
    page.wait_for_load_state()
    results = page.locator("#search-results").inner_text()
    assert "choose a queue" not in results
    assert " in failed jobs " in results


def test_internal_webhook_queue_is_apart_and_marked(page: Any, stack: Stack) -> None:
    """The webhook deliveries queue is not among the user queues: an admin
    sees it in the marked internal group, and search does not offer it."""
    Queue("bullpen-webhooks", stack.redis_url).add("deliver", {})
    Queue("walk-user", stack.redis_url).add("a", {})
    # Both rows, once discovery (cached for a while) has found the new queue.
    reload_until(page, stack.url + "/", 'tr[data-queue="bull:walk-user"]')
    row = reload_until(page, stack.url + "/", 'tr[data-queue="bull:bullpen-webhooks"]')
    assert row.locator("xpath=..").get_attribute("class") == "internal"
    assert row.locator(".badge", has_text="internal").count() == 1
    user = page.locator('tr[data-queue="bull:walk-user"]').locator("xpath=..")
    assert user.get_attribute("class") is None
    shot(page, "walk-overview-internal")
    page.goto(stack.url + "/search/")
    options = page.locator("#id_queue option").all_inner_texts()
    assert "bull:walk-user" in options and "bull:bullpen-webhooks" not in options


def test_long_names_stay_on_screen(page: Any, stack: Stack) -> None:
    """A 150-character queue name and job name are cut with an ellipsis (the
    whole name in the title) and push no column off screen."""
    name = "walk-long-" + "x" * 150
    job_name = "txt2img-" + "y" * 150
    Queue(name, stack.redis_url).add(job_name, {"prompt": "a cat"})
    link = reload_until(page, stack.url + "/", f'tr[data-queue="bull:{name}"] a.clip')
    assert link.get_attribute("title") == f"bull:{name}"
    overflow = (
        "(s) => { const e = document.querySelector(s);"
        " return e.scrollWidth - e.clientWidth; }"
    )
    shot(page, "walk-overview-long-name")
    assert page.evaluate(overflow, "#queue-table") <= 0
    page.goto(stack.url + f"/queues/bull/{name}/")
    assert page.locator(f'span.clip[title="{job_name}"]').count() == 1
    assert page.evaluate(overflow, "#job-list .table-wrap") <= 0
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, "walk-queue-long-name")


def test_delayed_job_says_when_it_runs(page: Any, stack: Stack) -> None:
    """A delayed job's page says when it runs."""
    q = Queue("walk-later", stack.redis_url)
    job = q.add("later", {}, delay=10 * MINUTE_MS)
    page.goto(stack.url + f"/queues/bull/walk-later/jobs/{job.id}/")
    text = page.locator("#waiting-reason").inner_text()
    assert f"Delayed until {utc(job.timestamp + 10 * MINUTE_MS)} UTC" in text
    assert "in 9 m" in text or "in 10 m" in text
    shot(page, "walk-job-delayed")
    page.goto(stack.url + "/queues/bull/walk-later/?state=delayed")
    row = page.locator(f'tr[data-job="bull:walk-later:{job.id}"]')
    assert f"runs at {ms_short(job.timestamp + 10 * MINUTE_MS)}" in row.inner_text()


def test_job_waiting_to_retry_says_so_without_stale_progress(
    page: Any, stack: Stack
) -> None:
    """A job whose first attempt failed after reporting 40% and that waits out
    its backoff: "retry 1 of 2 at <time>" with the last error, on its page
    and in the list, and no 40% from the failed attempt."""
    q = Queue("walk-retry", stack.redis_url)
    job = q.add(
        "render", {}, attempts=3, backoff={"type": "fixed", "delay": 10 * MINUTE_MS}
    )
    now = ops.now_ms()
    [(job_id, token, _)] = claimed(move_to_active(q, now=now))
    q.get_job(job_id).update_progress(40)
    move_to_delayed(
        q,
        job_id,
        10 * MINUTE_MS,
        now=now,
        token=token,
        fields=["failedReason", "CUDA out of memory"],
    )
    page.goto(stack.url + f"/queues/bull/walk-retry/jobs/{job.id}/")
    info = page.locator("#waiting-reason").inner_text()
    assert f"retry 1 of 2 (attempt 2 of 3) at {utc(now + 10 * MINUTE_MS)} UTC" in info
    assert "last error: CUDA out of memory" in info
    assert page.locator("#retry-info").count() == 0  # said once, not twice
    assert page.locator("[data-live-progress-text]").inner_text() == ""
    assert "40%" not in page.locator("main").inner_text()
    shot(page, "walk-job-retrying")
    page.goto(stack.url + "/queues/bull/walk-retry/?state=delayed")
    row = page.locator(f'tr[data-job="bull:walk-retry:{job.id}"]')
    assert f"retry 1 of 2 at {ms_short(now + 10 * MINUTE_MS)}" in row.inner_text()
    assert "40%" not in row.inner_text()
    shot(page, "walk-queue-delayed-rows")


def test_attempts_stay_true_after_a_manual_retry(page: Any, stack: Stack) -> None:
    """A job allowed one attempt fails, is retried by hand and fails again:
    its page says "2 (1 allowed; retried by hand)", never "2/1"."""
    q = Queue("walk-manual", stack.redis_url)
    job = q.add("render", {})
    fail_once(q, job.id)
    url = stack.url + f"/queues/bull/walk-manual/jobs/{job.id}/"
    page.goto(url)
    assert "attempts 1 of 1" in page.locator("main").inner_text()
    page.locator("form[action$='/actions/retry/'] button").click()
    page.locator("#flash").get_by_text("retried").wait_for()
    page.goto(url)
    assert "retried by hand (attempt 2)" in page.locator("main").inner_text()
    fail_once(q, job.id)
    page.goto(url)
    main = page.locator("main").inner_text()
    assert "attempts 2 (1 allowed; retried by hand)" in main
    assert "2/1" not in main


def _progress(page: Any, key: str) -> float:
    """The width (%) of a job's live progress bar."""
    bar = page.locator(f'[data-live-progress="{key}"] span').first
    found = re.search(r"width:\s*([\d.]+)%", bar.get_attribute("style") or "")
    return float(found.group(1)) if found else 0.0


def test_login_queue_retry_live_progress(browser: Any, stack: Stack) -> None:
    """An operator logs in, opens the queue, finds the failed job, retries it
    and watches its progress advance live. Every request the page made stayed
    under the dashboard's path (or /static/) and none was a 404; the live
    socket opened under the dashboard's path too."""
    root = urlsplit(stack.url).path + "/"
    assert root == ("/" if not stack.url.endswith(HOST_PREFIX) else HOST_PREFIX + "/")
    q = Queue("gpu", stack.redis_url)
    slow = {"vram": "1GiB", "steps": 12, "step_s": 0.25, "fail": True}
    job = q.add("demo", slow, attempts=1)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    requests: list[str] = []
    statuses: list[tuple[int, str]] = []
    sockets: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("response", lambda r: statuses.append((r.status, r.url)))
    page.on("websocket", lambda ws: sockets.append(ws.url))
    try:
        page.goto(stack.url + "/")
        assert urlsplit(page.url).path == root + "login/"
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", PASSWORD)
        page.locator("form [type=submit]").first.click()
        page.wait_for_url(stack.url + "/")
        deadline = time.monotonic() + 30
        while q.get_job_state(job.id).value != "failed":
            assert time.monotonic() < deadline, "the job never failed"
            time.sleep(0.2)
        # Each click navigates: the next waits for its page (on a busy machine
        # a click could land on the page before, and the walk stayed there).
        queue_path = f"{root}queues/bull/gpu/"
        page.locator('a[href$="/queues/bull/gpu/"]').first.click()
        page.wait_for_url(lambda url: urlsplit(url).path == queue_path)
        page.locator('a[href*="?state=failed"]').first.click()
        page.wait_for_url(lambda url: "state=failed" in urlsplit(url).query)
        page.locator(f'tr[data-job="bull:gpu:{job.id}"] a').first.click()
        page.wait_for_url(lambda url: urlsplit(url).path != queue_path)
        assert urlsplit(page.url).path == f"{queue_path}jobs/{job.id}/"
        page.locator("body[data-live-status=open]").wait_for()
        page.locator("form[action$='/actions/retry/'] button").click()
        page.locator("#flash").get_by_text("retried").wait_for()
        key = f"bull:gpu:{job.id}"
        deadline = time.monotonic() + 30
        seen: set[float] = set()
        while len({w for w in seen if 0 < w < 100}) < 2:
            assert time.monotonic() < deadline, f"progress never moved: {seen}"
            seen.add(_progress(page, key))
            time.sleep(0.1)
        shot(page, f"walk-live-progress-{'mounted' if root != '/' else 'root'}")
    finally:
        context.close()
    paths = [urlsplit(u).path for u in requests if not u.startswith("data:")]
    assert paths and all(p.startswith((root, "/static/")) for p in paths), paths
    assert [u for s, u in statuses if s == 404] == []
    assert sockets and all(urlsplit(u).path == f"{root}ws/live/" for u in sockets)
