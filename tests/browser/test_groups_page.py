"""Groups in Debian's Chromium against the real stack: a queue with three
groups of jobs and no worker shows its Groups panel with their backlogs; the
operator pauses one group from the page, which then shows it paused, the
queue core says so, and the audit log has the entry (screenshot
/tmp/groups-page.png). A group held for its used-up GPU-time budget is
released from its page by raising the budget."""

from __future__ import annotations

import shutil
import time
import uuid
from typing import Any

import redis
from django.urls import reverse

from gpu_workers.keys import BullpenKeys
from gpu_workers.quota import QUOTA_HOLD, Quotas, day_stamp
from queues import Queue

from .conftest import Stack, shot
from .test_csp import VIOLATION_SIGNS, _watch


def test_pause_a_group_from_the_queue_page(page: Any, stack: Stack) -> None:
    """The panel lists the groups by backlog; Pause on one reloads the page
    with it paused, `get_group` agrees, and the audit page lists it."""
    name = f"groups{uuid.uuid4().hex[:8]}"
    q = Queue(name, stack.redis_url)
    q.add_bulk(
        [
            {"name": "render", "data": {"i": i}, "opts": {"group": g}}
            for g, n in (("acme", 4), ("globex/eu", 2), ("initech", 1))
            for i in range(n)
        ]
    )
    seen = _watch(page)
    page.goto(stack.url + reverse("bullpen:queue", args=["bull", name]))
    panel = page.locator("#groups")
    panel.wait_for()
    rows = panel.locator("tr[data-group]")
    assert [rows.nth(i).get_attribute("data-group") for i in range(3)] == [
        "acme",
        "globex/eu",
        "initech",
    ]
    assert [
        rows.nth(i).locator("[data-field=waiting]").inner_text() for i in range(3)
    ] == ["4", "2", "1"]
    assert panel.locator("[data-summary=waiting]").inner_text() == "7"

    row = panel.locator('tr[data-group="globex/eu"]')
    row.locator("[data-group-action=pause]").click()
    paused_row = page.locator(
        '#groups tr[data-group="globex/eu"][data-group-state=paused]'
    )
    paused_row.wait_for()
    assert paused_row.locator(".badge").inner_text() == "paused"
    assert page.locator("#groups [data-summary=paused]").inner_text() == "1"
    info = q.get_group("globex/eu")
    assert info is not None and info.paused
    assert not q.get_group("acme").paused  # type: ignore[union-attr]
    path = shot(page, "groups-page")
    shutil.copyfile(path, "/tmp/groups-page.png")
    assert not [m for m in seen if any(s in m for s in VIOLATION_SIGNS)], seen

    page.goto(stack.url + reverse("bullpen:audit") + f"?target=bull:{name}")
    log = page.locator("main").inner_text()
    assert "group.pause" in log and f"bull:{name}:globex/eu" in log


def test_raise_a_used_up_budget_from_the_group_page(page: Any, stack: Stack) -> None:
    """A group past its budget shows it used up and held; setting a budget
    above today's use from its page reloads it released, and the core agrees."""
    name = f"budget{uuid.uuid4().hex[:8]}"
    q = Queue(name, stack.redis_url)
    q.add("render", {}, group="acme")
    r = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    usage = BullpenKeys().group_usage(q.keys.qualified_name, day_stamp(time.time()))
    r.hincrbyfloat(usage, "acme", 40)
    Quotas(r).set_budget(q.keys, "acme", 30)
    r.close()
    assert q.get_group("acme").hold == QUOTA_HOLD  # type: ignore[union-attr]
    page.goto(stack.url + reverse("bullpen:group", args=["bull", name, "acme"]))
    quota = page.locator("#group-quota")
    assert quota.locator("[data-field=exhausted]").inner_text().startswith("yes")
    actions = page.locator("#group-actions")
    actions.locator("summary", has_text="Budget").click()
    actions.locator("input[name=budget_s]").fill("100")
    actions.locator("[data-group-action=budget]").click()
    page.locator("#group-quota [data-field=budget]", has_text="100 GPU-s").wait_for()
    assert quota.locator("[data-field=exhausted]").inner_text() == "no"
    assert not q.get_group("acme").hold  # type: ignore[union-attr]
