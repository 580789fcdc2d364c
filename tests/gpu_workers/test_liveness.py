"""The supervisor's liveness file and `python -m gpu_workers check-alive`: a
running supervisor keeps the file fresh, a stopped one (SIGSTOP) lets it go
stale and the check fails; with log_format "json" it logs JSON lines."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpu_workers.liveness import (
    OWNER_FILE,
    STALE_DIR_S,
    liveness_dir,
    read_pid,
    sweep_stale_dirs,
)
from tests.gpu_workers.helpers import SupervisorProcess, supervisor_config
from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]


def check_alive(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the exec probe; its exit status and stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "gpu_workers", "check-alive", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.returncode, done.stderr.strip()


def test_check_alive_fails_on_a_missing_file(tmp_path: Path) -> None:
    """No file: exit 1 with one line naming it."""
    missing = tmp_path / "none.alive"
    code, err = check_alive("--liveness-file", str(missing), "--max-age", "5")
    assert code == 1
    assert err == f"not alive: {missing} is missing"


def test_supervisor_liveness_goes_stale_when_stopped_and_logs_json(
    redis_url: str, qname: str, tmp_path: Path
) -> None:
    """Fresh while it runs (exit 0, the path from BULLPEN_LIVENESS_FILE);
    SIGSTOPped, the check fails after --max-age; SIGCONT, fresh again; every
    line it logs is one JSON object with time, level, logger and message; a
    clean exit removes the file."""
    alive = tmp_path / "supervisor.alive"
    config = supervisor_config(
        redis_url,
        [{"queue": qname, "slots": 1, "workers": 1}],
        host="alive-host",
        log_format="json",
        liveness_file=str(alive),
    )
    supervisor = SupervisorProcess(config, tmp_path / "supervisor.log")
    env = {"BULLPEN_LIVENESS_FILE": str(alive)}
    try:
        wait_until(alive.exists, timeout=20)
        assert check_alive("--max-age", "2", env=env) == (0, "")

        os.kill(supervisor.pid, signal.SIGSTOP)
        try:
            time.sleep(2.5)
            code, err = check_alive("--max-age", "2", env=env)
            assert code == 1
            assert err.startswith(f"not alive: {alive} is "), err
            assert "old (more than 2 s)" in err
        finally:
            os.kill(supervisor.pid, signal.SIGCONT)
        wait_until(
            lambda: check_alive("--max-age", "2", env=env)[0] == 0,
            timeout=10,
        )
        assert supervisor.terminate() == 0
        assert not alive.exists()
    finally:
        supervisor.close()
    lines = [line for line in supervisor.log().splitlines() if line.strip()]
    supervisor_lines = [
        json.loads(line)
        for line in lines
        if '"gpu_workers.supervisor"' in line or '"gpu_workers.child"' in line
    ]
    assert supervisor_lines, lines
    for record in supervisor_lines:
        assert {"time", "level", "logger", "message"} <= record.keys(), record
    assert any(r["logger"] == "gpu_workers.child" for r in supervisor_lines)
    assert any("stopped" in r["message"] for r in supervisor_lines)


def test_folders_killed_supervisors_left_are_swept(tmp_path: Path) -> None:
    """What a SIGKILLed supervisor left (no owner running, nothing touched
    for STALE_DIR_S) goes; a live owner's folder, a freshly touched one and
    anything not named like it stay."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    old = time.time() - STALE_DIR_S - 60

    def folder(name: str, owner: int | None, age: float | None) -> Path:
        path = tmp_path / name
        path.mkdir()
        beat = path / "h1_gpu_0"
        beat.write_text("1 2\n")
        if owner is not None:
            (path / OWNER_FILE).write_text(f"{owner}\n")
        if age is not None:
            for p in (*path.iterdir(), path):
                os.utime(p, (age, age))
        return path

    dead = folder("bullpen-alive-dead", gone.pid, old)
    unowned = folder("bullpen-alive-unowned", None, old)
    mine = folder("bullpen-alive-mine", os.getpid(), old)
    fresh = folder("bullpen-alive-fresh", gone.pid, None)
    other = folder("other-dead", gone.pid, old)
    assert sweep_stale_dirs(tmp_path, "bullpen-alive-") == 2
    assert not dead.exists() and not unowned.exists()
    assert mine.exists() and fresh.exists() and other.exists()


def test_a_supervisor_folder_names_its_owner() -> None:
    path = liveness_dir()
    try:
        assert read_pid(path / OWNER_FILE, 0) == os.getpid()
    finally:
        shutil.rmtree(path)
