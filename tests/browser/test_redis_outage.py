"""Redis dies under a running dashboard and comes back, in Debian's Chromium:
an htmx refresh says so in the flash area and keeps the table, a full page
shows the 503 page (screenshot `redis-down`), which reloads itself into the
overview once Redis is back; then jobs run and counts move live again, so
daphne's reader, the hub, the supervisor and its workers all reconnected."""

from __future__ import annotations

import time
from typing import Any

import redis

from queues import Queue

from .conftest import Stack, shot


def _stop_redis(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.shutdown(nosave=True)
    except redis.ConnectionError:
        pass  # the server closed the connection as it exited
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            client.ping()
        except redis.ConnectionError:
            return
        time.sleep(0.05)
    raise AssertionError("redis-server did not stop")


def _open_overview_with_queue(page: Any, stack: Stack, timeout_s: float) -> Any:
    """The overview, reloaded until it lists bull:gpu: a queue new to Redis
    shows once the dashboard's discovery scan runs again (every 2 s on a
    small keyspace); returns its completed-count cell."""
    cell = page.locator('[data-live-count="bull:gpu:completed"]').first
    deadline = time.monotonic() + timeout_s
    while True:
        page.goto(stack.url + "/")
        if cell.count():
            return cell
        assert time.monotonic() < deadline, "bull:gpu is not on the overview"
        time.sleep(1)


def test_outage_is_reported_and_everything_recovers(page: Any, stack: Stack) -> None:
    q = Queue("gpu", stack.redis_url)
    q.add("demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01})
    _open_overview_with_queue(page, stack, 15)

    port = int(stack.redis_url.rsplit(":", 1)[1].split("/")[0])
    _stop_redis(stack.redis_url)

    # An htmx refresh of the table: the message lands in #flash, the table stays.
    page.fill("input[name=q]", "gpu")  # htmx: GET the table after 300 ms
    flash = page.locator("#flash")
    flash.get_by_text("is not answering").wait_for()
    assert page.locator("#queue-table").count() == 1

    # A full page: the 503 page, which names Redis and reloads itself.
    response = page.goto(stack.url + "/")
    assert response.status == 503
    assert page.locator("h1").inner_text() == "Redis is not answering"
    assert f"127.0.0.1:{port}" in page.locator("#redis-down").inner_text()
    shot(page, "redis-down")

    stack.server.start()  # same port, empty
    page.locator("h1", has_text="Queues").wait_for(timeout=20_000)  # self-reload

    # Workers, the events reader and the hub reconnected: a new job runs and
    # the overview's completed count moves without a reload.
    q = Queue("gpu", stack.redis_url)
    deadline = time.monotonic() + 30
    while not q.get_workers_count() and time.monotonic() < deadline:
        time.sleep(0.2)
    q.add("demo", {"vram": "1GiB", "steps": 1, "step_s": 0.01})
    cell = _open_overview_with_queue(page, stack, 15)  # Redis came back empty
    before = int(cell.inner_text() or 0)
    q.add_bulk(
        [{"name": "demo", "data": {"vram": "1GiB", "steps": 1}} for _ in range(3)]
    )
    deadline = time.monotonic() + 30
    while int(cell.inner_text() or 0) < before + 3:
        assert time.monotonic() < deadline, "completed count stuck after the outage"
        time.sleep(0.2)
