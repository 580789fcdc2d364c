"""Screenshots of the queue page's selectable list and of a running batch
(light and dark, desktop and a 390 px phone), for review: a real stack
(tests/browser/conftest.py), 60,000 failed jobs plus a few in other states,
a select-all Retry started from the page, each variant shot while it runs.

    .venv/bin/python bench/bulk_shots.py [out dir, default /work/shots/bulk]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()

from page_shots import logged_in_pages  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from queues import Queue  # noqa: E402
from tests.browser.conftest import CHROMIUM, start_stack  # noqa: E402
from tests.dashboard.helpers import make_active, run_jobs  # noqa: E402

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shots/bulk")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    stack_gen = start_stack()
    stack = next(stack_gen)
    try:
        q = Queue("render", stack.redis_url)
        for _ in range(30):
            run_jobs(q, 2_000, "failed", value="CUDA out of memory")
        run_jobs(q, 3, "completed")
        make_active(q, "upscale", {"image": "cat.png"})
        q.add("render", {"prompt": "a red bicycle"}, delay=3_600_000)
        q.add("render", {"prompt": "a lighthouse"})
        base = stack.url + "/queues/bull/render/"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            pages = logged_in_pages(browser, stack.url)
            for (theme, size), pg in pages.items():  # the mixed list, rows selected
                pg.goto(base + "?state=latest")
                boxes = pg.locator("input[name=ids]")
                for i in range(3):
                    boxes.nth(i).check()
                pg.screenshot(
                    path=str(OUT / f"list-{size}-{theme}.png"), full_page=True
                )
            first = pages[("light", "desktop")]
            first.goto(base + "?state=failed")
            first.locator("[data-select-page]").check()
            first.screenshot(path=str(OUT / "banner-desktop-light.png"))
            first.locator("[data-bulk-all]").click()
            first.screenshot(path=str(OUT / "all-selected-desktop-light.png"))
            first.once("dialog", lambda d: d.accept())
            first.locator("[data-bulk-verb=retry]").click()
            first.locator("#batch [data-batch-status=running]").wait_for()
            for (theme, size), pg in pages.items():
                pg.goto(base + "?state=failed")
                pg.locator("#batch [data-batch-status=running]").wait_for()
                pg.wait_for_timeout(1200)
                pg.locator("[data-select-page]").check()
                pg.screenshot(path=str(OUT / f"batch-running-{size}-{theme}.png"))
            first.locator("#batch [data-batch-status=done]").wait_for(timeout=120_000)
            first.screenshot(path=str(OUT / "batch-done-desktop-light.png"))
            browser.close()
    finally:
        stack_gen.close()
    print("screenshots in", OUT)


if __name__ == "__main__":
    main()
