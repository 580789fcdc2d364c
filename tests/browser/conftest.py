"""A real stack for browser tests: redis-server, daphne serving the dashboard,
a GPU worker supervisor on simulated GPUs, and Debian's Chromium driven by
Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from queues.devredis import RedisServer
from tests.dashboard.daphne_helpers import serve_daphne

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PASSWORD = "browser-test-pw"

playwright_api = pytest.importorskip("playwright.sync_api")


@dataclass
class Stack:
    """What the browser tests talk to."""

    url: str
    redis_url: str
    env: dict[str, str]
    #: The stack's redis-server (a test may stop and start it again).
    server: RedisServer


#: The host project (tests/hostproject) and where it mounts the dashboard.
HOST_SETTINGS = "tests.hostproject.settings"
HOST_ASGI_APP = "tests.hostproject.asgi:application"
HOST_PREFIX = "/ops/queues"


def start_stack(mounted: bool = False) -> Iterator[Stack]:
    """Redis, migrated SQLite with an admin, daphne and a supervisor (2 sim
    GPUs). `mounted`: daphne serves the host project, which has the dashboard
    under /ops/queues/ (Stack.url is then that prefix); the supervisor runs
    with the standalone settings either way (it shares only Redis)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(
            f"CHROMIUM NOT FOUND at {CHROMIUM}: browser tests were NOT run "
            "(`make test` installs Debian's chromium)"
        )
    server = RedisServer().start()
    tmp = tempfile.mkdtemp(prefix="bullpen-browser-")
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        REDIS_URL=server.url,
        BULLPEN_DB_PATH=str(Path(tmp) / "db.sqlite3"),
        BULLPEN_GPUS="sim:2x24GiB",
        BULLPEN_WORKERS="gpu:2",
        BULLPEN_HANDLER_MODULES="gpu_workers.demo_handlers",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    site_env = dict(env)
    if mounted:
        site_env.update(
            DJANGO_SETTINGS_MODULE=HOST_SETTINGS,
            HOST_DB_PATH=str(Path(tmp) / "host.sqlite3"),
        )
    py = sys.executable
    subprocess.run(
        [py, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=site_env,
        check=True,
    )
    subprocess.run(
        [
            py,
            "-c",
            "import django; django.setup(); from django.contrib.auth.models "
            "import User; User.objects.create_superuser('admin', '', "
            f"{PASSWORD!r})",
        ],
        cwd=ROOT,
        env=site_env,
        check=True,
    )
    procs = [
        subprocess.Popen(
            [py, "manage.py", "runworkers"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    base = HOST_PREFIX if mounted else ""
    try:
        site, port = serve_daphne(
            site_env, Path(tmp) / "daphne.log", HOST_ASGI_APP if mounted else None
        )
        procs.append(site)
        yield Stack(f"http://127.0.0.1:{port}{base}", server.url, env, server)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


# Module scope: Playwright's sync API keeps an event loop running in the main
# thread while it is open, which would break asyncio.run() in later tests.
@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The standalone site at the root of its own daphne (start_stack)."""
    yield from start_stack()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's Chromium, headless, through Playwright."""
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
            ],
        )
        yield b
        b.close()


def logged_in_page(browser: Any, url: str, **context_options: Any) -> Any:
    """A page of a new browser context (`context_options`: viewport,
    color_scheme...), logged in as the admin on the stack at `url`; close
    it with `page.context.close()`."""
    context = browser.new_context(**context_options)
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    pg.goto(url + "/")
    if pg.locator("input[name=password]").count():
        pg.fill("input[name=username]", "admin")
        pg.fill("input[name=password]", PASSWORD)
        pg.locator("form [type=submit]").first.click()
        pg.wait_for_load_state()
    return pg


@pytest.fixture
def page(browser: object, stack: Stack) -> Iterator[object]:
    """A page logged in as the admin."""
    pg = logged_in_page(browser, stack.url, viewport={"width": 1280, "height": 900})
    yield pg
    pg.context.close()


def shot(page: object, name: str) -> Path:
    """Save a full-page screenshot to tests/browser/artifacts/ (git-ignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    return path
