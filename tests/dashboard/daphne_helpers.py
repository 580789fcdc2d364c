"""A real daphne serving the dashboard for tests that need the ASGI server
itself (its signals, its access log), on its own port and SQLite database."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dashboard.run import daphne_args
from queues.devredis import free_port
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
#: What tests give daphne as DJANGO_SECRET_KEY (production settings need one).
TEST_SECRET_KEY = "test-only-" + "k" * 50


@dataclass
class Daphne:
    """A running daphne: its process, base URL, environment and log file."""

    proc: subprocess.Popen[bytes]
    url: str
    env: dict[str, str]
    log: Path

    def log_text(self) -> str:
        """Everything daphne wrote so far (stdout and stderr)."""
        return self.log.read_text(errors="replace")


def dashboard_env(tmp_path: Path, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a dashboard process on `redis_url` and its own SQLite."""
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        DJANGO_SECRET_KEY=TEST_SECRET_KEY,
        REDIS_URL=redis_url,
        BULLPEN_DB_PATH=str(tmp_path / "db.sqlite3"),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def migrate(env: dict[str, str]) -> None:
    """Create the database the environment names."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )


@contextmanager
def daphne(tmp_path: Path, redis_url: str, **extra: str) -> Iterator[Daphne]:
    """Migrate, start daphne and wait until it answers; killed afterwards if
    the test left it running."""
    env = dashboard_env(tmp_path, redis_url, **extra)
    migrate(env)
    port = free_port()
    log = tmp_path / "daphne.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *daphne_args("127.0.0.1", port)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert proc.poll() is None, log.read_text(errors="replace")
        try:
            with urllib.request.urlopen(f"{url}/login/", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_until(answers, timeout=30, interval=0.1, what="daphne to answer")
        yield Daphne(proc, url, env, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
