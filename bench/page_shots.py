"""Screenshots of the operator pages (issue 15) for review, light and dark,
desktop and a 390 px phone: overview and queue page with their charts, a job
waiting for its retry (waiting reason, attempt history, GPU-seconds), the job
schedulers page, the Redis panel, the workers page, the GPU page with its
charts and the GPU time page. A real stack (tests/browser/conftest.py: Redis,
daphne, a supervisor on 2 simulated GPUs serving queue `gpu` with the demo
handler) runs real jobs first.

    .venv/bin/python bench/page_shots.py [out dir, default /work/shots/pages]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()

from django.urls import reverse  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from queues import Queue  # noqa: E402
from tests.browser.conftest import CHROMIUM, logged_in_page, start_stack  # noqa: E402

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shots/pages")
SIZES = {
    "desktop": {"width": 1280, "height": 900},
    "phone": {"width": 390, "height": 844},
}
THEMES = ("light", "dark")


def logged_in_pages(browser: Any, url: str) -> dict[tuple[str, str], Any]:
    """A logged-in page per (theme, size)."""
    return {
        (theme, size): logged_in_page(
            browser, url, viewport=viewport, color_scheme=theme
        )
        for theme in THEMES
        for size, viewport in SIZES.items()
    }


def make_work(q: Queue) -> str:
    """Jobs the supervisor runs (GPU time, attempts, charts), one failing
    once and waiting for its retry, two schedulers; the retrying job's id."""
    for i in range(12):
        q.add("demo", {"vram": f"{2 + i % 5}GiB", "steps": 4, "step_s": 0.1})
    retrying = q.add(
        "demo",
        {"vram": "6GiB", "steps": 3, "step_s": 0.1, "fail": True},
        attempts=3,
        backoff={"type": "fixed", "delay": 3_600_000},
    )
    q.upsert_job_scheduler(
        "nightly-embeddings",
        cron="0 30 2 * * *",
        tz="Europe/Paris",
        template={"name": "demo", "data": {"steps": 2}, "opts": {"attempts": 2}},
    )
    q.upsert_job_scheduler(
        "warm-cache", every_ms=300_000, template={"name": "demo", "data": {}}
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        counts = q.get_counts("completed", "delayed")
        if counts["completed"] >= 12 and counts["delayed"] >= 1:
            break
        time.sleep(0.5)
    else:
        raise RuntimeError(f"the jobs did not run: {q.get_counts()}")
    return str(retrying.id)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    stack_gen = start_stack()
    stack = next(stack_gen)
    try:
        q = Queue("gpu", stack.redis_url)
        job_id = make_work(q)
        urls = {
            "overview": reverse("bullpen:overview"),
            "queue": reverse("bullpen:queue", args=["bull", "gpu"]),
            "job-retrying": reverse("bullpen:job", args=["bull", "gpu", job_id]),
            "schedulers": reverse("bullpen:schedulers", args=["bull", "gpu"]),
            "redis": reverse("bullpen:redis"),
            "workers": reverse("bullpen:workers"),
            "gpus": reverse("bullpen:gpus"),
            "gpu-time": reverse("bullpen:gpu-time"),
        }
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            for (theme, size), pg in logged_in_pages(browser, stack.url).items():
                for name, url in urls.items():
                    pg.goto(stack.url + url)
                    pg.wait_for_load_state("networkidle")
                    pg.wait_for_timeout(300)  # charts draw after their fetch
                    pg.screenshot(
                        path=str(OUT / f"{name}-{size}-{theme}.png"), full_page=True
                    )
            browser.close()
        q.close()
    finally:
        stack_gen.close()
    print("screenshots in", OUT)


if __name__ == "__main__":
    main()
