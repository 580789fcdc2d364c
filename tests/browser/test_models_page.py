"""Models resident on a GPU (issue 24), in Debian's Chromium against the real
stack plus a real supervisor on one simulated 24 GiB GPU serving `bt-models`
with the test handlers' simulated models (t-slow: 4 GiB, 2 s to load, here
x3; t-big 12 GiB; t-mid 6 GiB): a cold start reads `loading_model` on the job page
while the GPU page marks t-slow loading, then resident, its loads 0 -> 1;
then an 18 GiB budget that cannot hold t-big and t-mid together evicts
t-big, and the bar, the counts and the events list say so.

Everything is read from the DOM (data attributes, titles, table cells),
every wait is bounded and waits for a state, never a fixed time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from queues import Queue
from tests.gpu_workers.helpers import SupervisorProcess, supervisor_config

from .conftest import Stack, logged_in_page, playwright_api
from .slow_loads import LOAD_SCALE
from .test_dashboard_live import _poll

QUEUE = "bt-models"
HOST = "bt-models"
GPU = f"SIM-{HOST}-0"
GiB = 2**30
#: 24 GiB - 5 GiB reserve - 1 GiB CUDA context - no margin: t-slow + t-big +
#: 1 GiB working fit (17 GiB), t-big + t-mid + 1 GiB (19 GiB) do not.
BUDGET = 18 * GiB


@pytest.fixture
def fleet(stack: Stack, tmp_path: Path) -> Iterator[SupervisorProcess]:
    """A supervisor on one simulated GPU with the test models, their loads
    LOAD_SCALE times slower (slow_loads.py), warm pools off (nothing
    preloads: every load and eviction is a job's doing)."""
    config = supervisor_config(
        stack.redis_url,
        [{"queue": QUEUE, "slots": 1}],
        host=HOST,
        gpus="sim:1x24GiB",
        reserve_bytes="5GiB",
        context_bytes="1GiB",
        margin_bytes="0",
        model_pools=False,
        placement_cold_hold_s=0.5,
    )
    config["handler_modules"].append("tests.browser.slow_loads")
    sup = SupervisorProcess(config, tmp_path / "supervisor.log")
    try:
        yield sup
    finally:
        if sup.proc.poll() is None:
            sup.terminate()
        sup.close()


def _card(page: Any) -> Any:
    return page.locator(f'article.gpu[data-gpu="{GPU}"]')


def _shoot_card(page: Any, path: Path) -> None:
    """A screenshot of the GPU's card. A live update can replace the card
    while it is taken (Playwright then says it is not attached): the next
    try takes the new one."""
    for tries_left in (2, 1, 0):
        try:
            _card(page).screenshot(path=str(path))
            return
        except playwright_api.Error as exc:
            if "not attached" not in str(exc) or not tries_left:
                raise


#: The GPU card's model bar, counts and events, read in one go in the page:
#: live updates re-render a shown host's cards, so element by element reads
#: could meet a card replaced halfway (and wait for a segment that is gone).
_READ_CARD = """card => {
  const bar = card.querySelector(".model-bar");
  if (!bar) return null;
  const bytes = el => el ? parseInt(el.getAttribute("data-bytes") || "-1", 10) : -1;
  const segments = {};
  for (const seg of bar.querySelectorAll("[data-segment=model]")) {
    segments[seg.getAttribute("data-model")] = [
      seg.getAttribute("data-model-state"),
      parseInt(seg.getAttribute("data-bytes") || "-1", 10),
      seg.getAttribute("title") || "",
    ];
  }
  const counts = {};
  for (const row of card.querySelectorAll("tr[data-model-counts]")) {
    counts[row.getAttribute("data-model-counts")] = [...row.querySelectorAll("td")]
      .map(td => td.innerText);
  }
  const events = [...card.querySelectorAll("li[data-model-event]")].map(li => [
    li.getAttribute("data-model-event"),
    li.querySelector("strong").innerText,
  ]);
  return {
    label: bar.getAttribute("aria-label") || "",
    segments,
    working: bytes(bar.querySelector("[data-segment=working]")),
    free: bytes(bar.querySelector("[data-segment=free]")),
    counts,
    events,
  };
}"""


def _gpu_models(page: Any, url: str) -> dict[str, Any]:
    """Reload the GPU page; this GPU's bar and counts as the DOM has them:
    {"budget": ..., "segments": {model: (state, bytes, title)}, "working",
    "counts": {model: {"loads", "mean_s", "evictions"}}, "events": [(kind, model)]}."""
    page.goto(url)
    card = _card(page)
    read = card.evaluate(_READ_CARD) if card.count() else None
    if read is None:
        return {"segments": None, "working": None, "counts": {}, "events": []}
    read["segments"] = {m: tuple(v) for m, v in read["segments"].items()}
    read["counts"] = {
        m: {
            "loads": int(cells[1]),
            "mean_s": float(cells[2].split()[0]) if cells[2] != "–" else None,
            "evictions": int(cells[3]),
        }
        for m, cells in read["counts"].items()
    }
    read["events"] = [tuple(e) for e in read["events"]]
    return read


def _state(read: dict[str, Any], model: str) -> str | None:
    """A model's segment state in a _gpu_models() read (None: no segment,
    or no bar at all, as while a late heartbeat lets the worker lapse)."""
    found = (read["segments"] or {}).get(model)
    return found[0] if found else None


def _drawn(page: Any, model: str) -> float:
    """Wait until this GPU's segment of `model` is drawn at the width its
    data-bar-width says (the CSS transition over, +-2 points for the
    segments' padding); that width in percent of the bar."""
    seg = f'[data-gpu="{GPU}"] .model-bar [data-model="{model}"]'
    page.wait_for_function(
        """sel => { const s = document.querySelector(sel); if (!s) return false;
        const bar = s.parentElement.getBoundingClientRect().width;
        const want = parseFloat(s.getAttribute('data-bar-width'));
        return Math.abs(100 * s.getBoundingClientRect().width / bar - want) < 2; }""",
        arg=seg,
        timeout=10_000,
    )
    return float(page.locator(seg).get_attribute("data-bar-width") or 0)


def _reason(page: Any, url: str) -> tuple[str | None, str]:
    """Reload the job page: its waiting code and text (None: no reason)."""
    page.goto(url)
    block = page.locator("#waiting-reason")
    if not block.count():
        return None, ""
    return block.get_attribute("data-waiting-code"), block.inner_text()


def test_models_load_and_evict_on_the_gpu_page(
    browser: Any, stack: Stack, fleet: SupervisorProcess, tmp_path: Path
) -> None:
    """The must-show of issue 24, step by step against a real fleet."""
    q = Queue(QUEUE, stack.redis_url)
    gpus_url = stack.url + reverse("bullpen:gpus")
    job_page = logged_in_page(
        browser, stack.url, viewport={"width": 1280, "height": 900}
    )
    gpu_page = logged_in_page(
        browser, stack.url, viewport={"width": 1280, "height": 1400}
    )
    try:
        # The worker is up and publishes models (none yet): an empty bar.
        before = _poll(
            lambda: _gpu_models(gpu_page, gpus_url),
            lambda m: m["segments"] == {},
            30,
            "the GPU's empty model bar",
        )
        assert f"{BUDGET // GiB}.0 GiB" in before["label"], before["label"]
        assert before["free"] == BUDGET
        assert before["counts"].get("t-slow", {"loads": 0})["loads"] == 0

        # 1. A cold start: the job page reads loading_model, the bar marks it.
        slow = q.add("test.model", {"model": "t-slow", "working": "1GiB", "s": 0.3})
        job_url = stack.url + reverse("bullpen:job", args=["bull", QUEUE, slow.id])
        code, text = _poll(
            lambda: _reason(job_page, job_url),
            lambda r: r[0] == "loading_model",
            15,
            "the job page reads loading_model",
        )
        assert f"Loading model t-slow on GPU {GPU} ({HOST})" in text, text
        loading = _poll(
            lambda: _gpu_models(gpu_page, gpus_url),
            lambda m: _state(m, "t-slow") == "loading",
            2 * LOAD_SCALE,  # the load's own length: past it, it was missed
            "t-slow loading on the GPU page",
        )
        assert loading["segments"]["t-slow"][1] == 4 * GiB
        assert "t-slow: 4.0 GiB" in loading["segments"]["t-slow"][2]
        assert (
            gpu_page.locator(
                f'[data-gpu="{GPU}"] .seg.model.loading[data-model="t-slow"]'
            ).count()
            == 1
        )  # the striped class the CSS draws
        assert abs(_drawn(gpu_page, "t-slow") - 100 * 4 / 18) < 0.01
        _shoot_card(gpu_page, tmp_path / "gpu-models-loading.png")
        # Counted when a load ends: none yet, and no load event.
        assert loading["counts"].get("t-slow", {"loads": 0})["loads"] == 0
        assert ("load", "t-slow") not in loading["events"]
        _poll(
            lambda: q.get_job_state(slow.id).value,
            lambda s: s == "completed",
            20,
            "the t-slow job completes",
        )
        # The page trails the worker by a heartbeat or two (later still on
        # a busy machine): each read below waits for the whole state it
        # checks, no job running, not just for the job to be done.
        resident = _poll(
            lambda: _gpu_models(gpu_page, gpus_url),
            lambda m: (
                m["counts"].get("t-slow", {}).get("loads") == 1
                and _state(m, "t-slow") == "resident"
                and m["working"] == 0
                and ("load", "t-slow") in m["events"]
            ),
            15,
            "t-slow resident, one load",
        )
        assert set(resident["segments"]) == {"t-slow"}
        # The load slept its 2 s x LOAD_SCALE (the page rounds to 0.1 s).
        assert resident["counts"]["t-slow"]["mean_s"] >= 2 * LOAD_SCALE - 0.1
        code, _ = _reason(job_page, job_url)
        assert code is None  # done: nothing to explain any more

        # 2. t-big fits beside t-slow (17 of 18 GiB); t-mid then needs both
        # idle models gone (LRU: t-slow, then t-big).
        big = q.add("test.model", {"model": "t-big", "working": "1GiB", "s": 0.05})
        _poll(
            lambda: q.get_job_state(big.id).value,
            lambda s: s == "completed",
            20,
            "the t-big job completes",
        )
        both = _poll(
            lambda: _gpu_models(gpu_page, gpus_url),
            lambda m: (
                set(m["segments"] or ()) == {"t-slow", "t-big"}
                and _state(m, "t-slow") == _state(m, "t-big") == "resident"
                and m["working"] == 0
            ),
            15,
            "t-slow and t-big resident together",
        )
        assert both["segments"]["t-big"][1] == 12 * GiB
        assert both["free"] == BUDGET - 16 * GiB
        mid = q.add("test.model", {"model": "t-mid", "working": "1GiB", "s": 0.05})
        _poll(
            lambda: q.get_job_state(mid.id).value,
            lambda s: s == "completed",
            20,
            "the t-mid job completes",
        )
        after = _poll(
            lambda: _gpu_models(gpu_page, gpus_url),
            lambda m: (
                set(m["segments"] or ()) == {"t-mid"}
                and _state(m, "t-mid") == "resident"
                and m["counts"].get("t-big", {}).get("evictions") == 1
                and m["working"] == 0
                and ("load", "t-mid") in m["events"]
            ),
            15,
            "t-big evicted, t-mid resident",
        )
        assert after["segments"]["t-mid"][:2] == ("resident", 6 * GiB)
        assert after["free"] == BUDGET - 6 * GiB
        loads = {m: (c["loads"], c["evictions"]) for m, c in after["counts"].items()}
        assert loads == {"t-slow": (1, 1), "t-big": (1, 1), "t-mid": (1, 0)}
        assert ("evict", "t-big") in after["events"]
        # Newest first: t-mid's load comes after both evictions it needed.
        kinds = after["events"]
        assert kinds.index(("load", "t-mid")) < kinds.index(("evict", "t-big"))
        assert abs(_drawn(gpu_page, "t-mid") - 100 * 6 / 18) < 0.01
        path = tmp_path / "gpu-models-after-eviction.png"
        gpu_page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
    finally:
        job_page.context.close()
        gpu_page.context.close()
        q.close()
