"""The GPU page at 512 simulated GPUs (issue 26), in Chromium: the summary,
the grid of every GPU, a filter, a host's cards, and a live change reaching
the page (a worker that fails turns its square and its card), under the CSP
with no console error."""

from __future__ import annotations

import time
from typing import Any

import redis

from gpu_workers.heartbeat import queue_heartbeat
from gpu_workers.keys import BullpenKeys
from tests.gpu_workers.fleet_records import (
    gpu_uuid,
    host_name,
    publish_fleet,
    worker_id,
    worker_record,
)

from .conftest import Stack, shot

HOSTS = 64  # x 8 = 512 published GPUs, beside the stack's own 2


def _errors(page: Any) -> list[str]:
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.append(str(e)))
    return seen


def _open_until(page: Any, url: str, selector: str, timeout_s: float = 20) -> None:
    """Load `url` until `selector` is on it (the snapshot may be 2 s old)."""
    deadline = time.monotonic() + timeout_s
    while True:
        page.goto(url)
        if page.locator(selector).count():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{selector} never showed on {url}")
        time.sleep(0.5)


def test_fleet_page_at_512_gpus(page: Any, stack: Stack) -> None:
    r = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    publish_fleet(r, HOSTS, ttl_s=300)
    errors = _errors(page)
    _open_until(page, stack.url + "/gpus/", '[data-summary="gpus"]:text("514")')
    # The summary: 512 published (256 busy, 16 down) + the stack's 2 GPUs.
    assert page.locator('[data-summary="busy"]').inner_text() == "256"
    assert page.locator('[data-summary="down"]').inner_text() == "16"
    # The grid: a square per GPU, grouped per host, drawn by gpus.js.
    page.wait_for_selector('#gpu-grid[data-cells="514"]')
    assert page.locator("#gpu-grid .cell").count() == 514
    assert page.locator("#gpu-grid .host-group").count() == HOSTS + 1
    assert page.locator("#gpu-grid .cell.down").count() == 16
    page.locator('[data-grid-colour="vram"]').click()
    assert page.locator('[data-grid-colour="vram"]').get_attribute("aria-pressed") == (
        "true"
    )
    page.locator('[data-grid-colour="util"]').click()
    shot(page, "fleet-512")
    # A filter: state down leaves 16 GPUs; the others fade, cards are theirs.
    page.select_option("select[name=state]", "down")
    page.locator("form.gpu-filters button[type=submit]").click()
    page.wait_for_selector("#gpu-grid[data-cells]")
    assert "state=down" in page.url
    page.wait_for_function(
        "document.querySelectorAll('#gpu-grid .cell.faded').length === 498"
    )
    cards = page.locator("#gpu-hosts article.gpu")
    assert cards.count() == 4
    assert page.locator(f'article.gpu[data-gpu="{gpu_uuid(3, 0)}"]').count() == 1
    # A host's cards: a click on one of its squares opens that GPU's card.
    page.goto(stack.url + f"/gpus/?host={host_name(5)}")
    page.wait_for_selector('#gpu-grid[data-cells="514"]')
    assert page.locator("#gpu-hosts article.gpu").count() == 8
    page.locator(f'[data-cell="{host_name(5)}/{gpu_uuid(5, 2)}"]').click()
    page.wait_for_url(f"**gpu={gpu_uuid(5, 2)}*")
    assert page.locator("#gpu-hosts article.gpu").count() == 1
    # Live: GPU 2 of host 5's worker fails; its square turns down, the
    # summary counts it, and the card re-renders with the failed badge.
    page.goto(stack.url + f"/gpus/?host={host_name(5)}")
    page.wait_for_selector('#gpu-grid[data-cells="514"]')
    page.wait_for_selector("body[data-live-status=open]")
    cell = f'[data-cell="{host_name(5)}/{gpu_uuid(5, 2)}"]'
    assert page.locator(cell).get_attribute("data-state") == "idle"
    record = worker_record(5, 2, "failed")
    pipe = r.pipeline(transaction=False)
    queue_heartbeat(pipe, BullpenKeys(), "worker", record["id"], record, 300)
    pipe.execute()
    page.wait_for_selector(f'{cell}[data-state="down"]', timeout=20_000)
    page.wait_for_selector('[data-summary="down"]:text("17")', timeout=20_000)
    badge = f'[data-worker-state="{worker_id(5, 2)}"]'
    page.wait_for_selector(f"{badge}:text('failed')", timeout=20_000)
    shot(page, "fleet-512-host")
    assert not errors, errors
    r.close()
