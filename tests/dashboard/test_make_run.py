"""`make run` (python -m dashboard.run) end to end: everything comes up on its
own redis-server and a stop signal takes every process down with it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import quiet_port, wait_until
from tests.testdb import subprocess_database

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
    tmp_path: Path, port: int, new_session: bool = False, **extra_env: str
) -> Iterator[tuple[subprocess.Popen[str], set[int]]]:
    """`python -m dashboard.run` on its own Redis (unless `extra_env` names
    one), port, database and access log, and the set of processes the test
    saw below it: whatever is still alive of them (and make run itself) is killed
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
        BULLPEN_ACCESS_LOG=str(tmp_path / "access.log"),
        BULLPEN_STATIC_ROOT=str(tmp_path / "static"),
    )
    env.update(extra_env)
    subprocess_database(env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashboard.run"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=new_session,
    )
    below: set[int] = set()
    try:
        yield proc, below
    finally:
        if proc.poll() is None:
            below.update(descendants(proc.pid))  # also what started since
            proc.kill()
            proc.wait()
        for pid in below:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize(
    "stop",
    ["SIGINT", "SIGTERM", "SIGHUP", "group SIGTERM twice", "SIGKILL"],
)
def test_make_run_comes_up_and_a_stop_signal_takes_everything_down(
    tmp_path: Path, stop: str
) -> None:
    """The dashboard answers, its own Redis and the supervisor's workers run;
    Ctrl-C, SIGTERM (a process manager) or SIGHUP (a closed terminal) to `make run`
    stops them all, Redis included, instead of orphaning them. So does a
    signal to its whole process group sent twice at once (`timeout`, then a
    second Ctrl-C: "stop now"): the GPU workers die with their supervisor
    instead of draining for ever against the stopped Redis. A SIGKILL (or
    an OOM kill) of `make run`, which can stop nothing itself, ends them too:
    each gets SIGTERM when make run dies (before, the whole stack ran on,
    each process in a session of its own, holding the port)."""
    port = quiet_port()
    group = stop.startswith("group")
    # A long drain: GPU workers left behind would outlive the wait below.
    drain = {"BULLPEN_DRAIN_TIMEOUT_S": "60"} if group else {}
    with make_run(tmp_path, port, new_session=group, **drain) as (proc, below):
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
        if group:
            os.killpg(proc.pid, signal.SIGTERM)
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(getattr(signal, stop))
        assert proc.wait(30) == (-signal.SIGKILL if stop == "SIGKILL" else 0)
        wait_until(
            lambda: not [p for p in below if alive(p)],
            timeout=10,
            what="every process below make run to be gone",
        )


def test_a_stop_signal_during_start_up_leaves_nothing(tmp_path: Path) -> None:
    """SIGTERM while `make run` is still migrating stops the redis-server it
    had started (and whatever else was up) instead of leaking it."""
    with make_run(tmp_path, quiet_port()) as (proc, below):
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


def test_a_taken_port_stops_make_run_before_it_starts_anything(
    tmp_path: Path,
) -> None:
    """Another process listens on the dashboard's port: `make run` says so,
    names the setting that moves it, and exits with status 1 before it starts
    anything (before, daphne alone failed to bind, the banner still sent the
    operator to that other process with the admin's one-time password, and
    make run stopped with status 0)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(8)
        port = held.getsockname()[1]
        with make_run(tmp_path, port, BULLPEN_HOST="127.0.0.1") as (proc, _):
            out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    assert f"cannot serve the dashboard on 127.0.0.1:{port}: " in out, out
    assert "Address already in use" in out and "BULLPEN_PORT=<port>" in out, out
    assert "dashboard: http://" not in out and "redis-server" not in out, out
    assert not (tmp_path / "db.sqlite3").exists()  # (nothing migrated)


def test_a_second_stop_signal_at_once_kills_instead_of_orphaning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two stop signals at once (`timeout` sends its child one and its group
    another): the first raises KeyboardInterrupt, the second only counts (it
    used to raise too, and raised while the first unwound towards the stop,
    it aborted the stop: every process, each in a session of its own, was
    left running), and the stop then kills at once, as a second Ctrl-C does,
    a process that ignores SIGTERM included."""
    from dashboard import run

    monkeypatch.setattr(run, "_signalled", [])
    with pytest.raises(KeyboardInterrupt):
        run._interrupt(signal.SIGTERM, None)
    try:
        run._interrupt(signal.SIGTERM, None)  # counted, not raised
    except KeyboardInterrupt:
        pytest.fail("a second stop signal raised KeyboardInterrupt again")
    assert run._signalled == [signal.SIGTERM, signal.SIGTERM]
    ignore = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ignoring', flush=True); time.sleep(120)"
    )
    stubborn = subprocess.Popen(
        [sys.executable, "-c", ignore],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ignoring\n"
    handlers = {s: signal.getsignal(s) for s in run.SIGNALS}
    began = time.monotonic()
    try:
        run._stop({"worker": stubborn}, None, SimpleNamespace(drain_timeout_s=120))
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
        if stubborn.poll() is None:
            stubborn.kill()
            stubborn.wait()
        stubborn.stdout.close()
    assert stubborn.returncode == -signal.SIGKILL
    assert time.monotonic() - began < 60  # not the drain's 130 s
    assert "stopping now: killing what is still running" in capsys.readouterr().out


def _dry_run(tmp_path: Path, target: str) -> str:
    """What `make -n <target>` would run from a fresh checkout (no venv)."""
    for name in ("Makefile", "requirements.txt", "requirements-test.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    return subprocess.run(
        ["make", "-n", target, "PYTHON=python3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.skipif(not shutil.which("make"), reason="needs make")
def test_make_run_installs_only_the_runtime(tmp_path: Path) -> None:
    """`make run` installs requirements.txt and nothing for tests; `make
    test` installs the test requirements on top."""
    run = _dry_run(tmp_path, "run")
    assert "-r requirements.txt" in run and "requirements-test.txt" not in run
    assert "-m dashboard.run" in run
    test = _dry_run(tmp_path, "test")
    assert "-r requirements.txt" in test and "-r requirements-test.txt" in test
    runtime = (ROOT / "requirements.txt").read_text().lower()
    for tool in ("pytest", "ruff", "mypy", "playwright", "schemathesis"):
        assert tool not in runtime, tool


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_make_run_banner_comes_last_and_requests_go_to_the_access_log(
    tmp_path: Path,
) -> None:
    """The URL and the admin password are printed together in a banner after
    everything's start-up lines; requests are logged to the access log file,
    not the terminal; pages refer to the static files make run collected."""
    port = quiet_port()
    access_log = tmp_path / "var" / "access.log"
    with make_run(tmp_path, port, BULLPEN_ACCESS_LOG=str(access_log)) as (proc, _):
        assert proc.stdout is not None
        before: list[str] = []
        for line in proc.stdout:
            if line.startswith("dashboard: http://"):
                break
            before.append(line)
        else:
            raise AssertionError(f"make run exited with {proc.wait()}")
        banner = [line, proc.stdout.readline(), proc.stdout.readline()]
        assert re.match(r"log in as admin, password \S{12,}", banner[1]), banner
        assert banner[2].strip() == f"access log: {access_log}"
        assert set(proc.stdout.readline().strip()) == {"="}
        # The workers were up before the banner: their lines are above it.
        assert any("serving bull:gpu" in b for b in before), before
        for _ in range(5):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/") as r:
                assert r.status == 200
                login = r.read().decode()
        # make run collected the static files: hashed names, cached for good.
        css = re.search(
            r'href="(/static/dashboard/dashboard\.[0-9a-f]{12}\.css)"', login
        )
        assert css, login
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{css[1]}") as r:
            assert "immutable" in r.headers["Cache-Control"]
        wait_until(
            lambda: access_log.exists() and "/login/" in access_log.read_text(),
            timeout=10,
            what="requests in the access log",
        )
        proc.send_signal(signal.SIGINT)
        rest = proc.stdout.read()
        assert proc.wait(30) == 0
    assert "/login/" not in "".join(before) + rest
