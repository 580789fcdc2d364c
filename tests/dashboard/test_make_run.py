"""`make run` (python -m dashboard.run) end to end: everything comes up on its
own redis-server and a stop signal takes every process down with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from queues.devredis import free_port
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children, their children, ...), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        return (
            (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
        )
    except OSError:
        return False


@contextmanager
def make_run(
    tmp_path: Path, port: int, **extra_env: str
) -> Iterator[tuple[subprocess.Popen[str], set[int]]]:
    """`python -m dashboard.run` on its own Redis (unless `extra_env` names
    one), port and database, and the set of processes the test saw below it:
    whatever is still alive of them (and make run itself) is killed
    afterwards, whatever the outcome."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "REDIS_URL",
            "BULLPEN_GPUS",
            "DJANGO_SETTINGS_MODULE",
            "DJANGO_SECRET_KEY",
        )
    }
    env.update(
        BULLPEN_PORT=str(port),
        BULLPEN_DB_PATH=str(tmp_path / "db.sqlite3"),
        BULLPEN_DRAIN_TIMEOUT_S="2",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra_env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashboard.run"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    below: set[int] = set()
    try:
        yield proc, below
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in below:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_make_run_comes_up_and_a_stop_signal_takes_everything_down(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """The dashboard answers, its own Redis and the supervisor's workers run;
    Ctrl-C, SIGTERM (a process manager) or SIGHUP (a closed terminal) to `make run`
    stops them all, Redis included, instead of orphaning them."""
    port = free_port()
    with make_run(tmp_path, port) as (proc, below):
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            if line.startswith("dashboard: http://"):
                break
            assert time.monotonic() < deadline, "make run did not come up"
        else:
            raise AssertionError(f"make run exited with {proc.wait()}")

        def login_page() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/") as r:
                    return r.status == 200
            except OSError:
                return False

        wait_until(login_page, timeout=30, what="the dashboard to answer")

        def workers_up() -> set[int] | None:
            found = descendants(proc.pid)
            cmdlines = [
                Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")
                for p in found
                if Path(f"/proc/{p}/cmdline").exists()
            ]
            ready = any(b"redis-server" in c for c in cmdlines) and (
                sum(b"gpu_workers.child" in c for c in cmdlines) == 2
            )
            return found if ready else None

        below.update(wait_until(workers_up, timeout=30, what="redis and two workers"))
        proc.send_signal(signum)
        assert proc.wait(30) == 0
        left = [p for p in below if alive(p)]
        assert not left, f"processes left running: {left}"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_stop_signal_during_start_up_leaves_nothing(tmp_path: Path) -> None:
    """SIGTERM while `make run` is still migrating stops the redis-server it
    had started (and whatever else was up) instead of leaking it."""
    with make_run(tmp_path, free_port()) as (proc, below):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("started redis-server"), line
        below.update(descendants(proc.pid))  # killed afterwards if left
        assert below, "no redis-server below make run"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        wait_until(
            lambda: not [p for p in below if alive(p)], timeout=10, what="all gone"
        )
