"""Why is this job waiting, in Debian's Chromium against the real stack
(daphne, a supervisor on two simulated 24 GiB GPUs serving `gpu`): the job
page names the reason of six situations built for real, and the queue list
tags its rows."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from queues import FlowProducer, Queue

from .conftest import Stack, shot
from .test_dashboard_live import _poll


def _reason(page: Any, stack: Stack, q: Queue, job_id: str, code: str) -> str:
    """Open the job's page; its waiting block's text, once it has `code`."""
    page.goto(stack.url + reverse("bullpen:job", args=[q.prefix, q.name, job_id]))
    block = page.locator("#waiting-reason")
    block.wait_for()
    assert block.get_attribute("data-waiting-code") == code
    # Near the state badge: in the same panel, right after it.
    assert block.evaluate(
        "el => el.previousElementSibling.querySelector('.badge') !== null"
    )
    text: str = block.inner_text()
    return text


def test_job_page_says_why_in_six_situations(page: Any, stack: Stack) -> None:
    """Paused, delayed, waiting for children (linked, and the link opens the
    child), no live worker, and on the supervisor's `gpu` queue with a full
    rate limiter: a job too big for its 24 GiB GPUs, and one that only
    waits for the limiter."""
    paused = Queue("wr-paused", stack.redis_url)
    job = paused.add("job", {})
    paused.pause()
    assert "The queue is paused" in _reason(page, stack, paused, job.id, "queue_paused")

    later = Queue("wr-later", stack.redis_url)
    job = later.add("job", {}, delay=3_600_000)
    assert "Delayed until" in _reason(page, stack, later, job.id, "delayed")

    node = FlowProducer(stack.redis_url).add(
        {
            "name": "parent",
            "queue_name": "wr-parent",
            "children": [{"name": "child", "queue_name": "wr-child"}],
        }
    )
    parent = Queue("wr-parent", stack.redis_url)
    text = _reason(page, stack, parent, node.job.id, "waiting_for_children")
    assert "1 of 1 pending" in text
    shot(page, "waiting-children")
    page.locator(".waiting-children a").click()
    page.wait_for_url(
        "**"
        + reverse("bullpen:job", args=["bull", "wr-child", node.children[0].job.id])
    )
    assert (
        "No live worker serves this queue"
        in page.locator("#waiting-reason").inner_text()
    )  # the child's own reason: nobody works wr-child

    gpu = Queue("gpu", stack.redis_url)
    gpu.set_global_rate_limit(1, 600_000)
    first = gpu.add("demo", {"vram": "1GiB", "steps": 1})
    _poll(
        lambda: gpu.get_job_state(first.id).value,
        lambda s: s in ("active", "completed"),
        30,
        "the supervisor's worker takes the first job",
    )
    big = gpu.add("demo", {"vram": "40GiB"})
    small = gpu.add("demo", {"vram": "1GiB"})
    text = _reason(page, stack, gpu, big.id, "vram_never_fits")
    assert "needs 40.0 GiB" in text and "Rate-limited" in text
    assert page.locator("#waiting-reason a", has_text="GPU workers").count() == 1
    shot(page, "waiting-vram-never-fits")
    text = _reason(page, stack, gpu, small.id, "rate_limited")
    assert "1 job started in this window (limit 1)" in text
    page.emulate_media(color_scheme="dark")
    shot(page, "waiting-rate-limited-dark")
    page.emulate_media(color_scheme="light")

    page.goto(
        stack.url + reverse("bullpen:queue", args=["bull", "gpu"]) + "?state=waiting"
    )
    tags = page.locator(".waiting-tag")
    _poll(lambda: tags.count(), lambda n: n == 2, 10, "tagged rows")
    assert sorted(tags.all_inner_texts()) == ["never fits a GPU", "rate-limited"]
    gpu.remove_global_rate_limit()
    for q in (paused, later, parent, gpu):
        q.close()
