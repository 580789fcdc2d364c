"""`manage.py runwebhooks` keeps its liveness file fresh while it runs;
`manage.py runwebhooks --check-alive` fails once it is stopped (SIGSTOP);
with BULLPEN_LOG_FORMAT=json its log lines are JSON objects."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]


def test_dispatcher_liveness_goes_stale_when_stopped_and_logs_json(
    redis_url: str, tmp_path: Path
) -> None:
    """Fresh while it runs (exit 0); SIGSTOPped, the check exits 1 with one
    line after --max-age; a SIGTERM exit removes the file; every log line of
    the run is one JSON object with time, level, logger and message."""
    alive = tmp_path / "webhooks.alive"
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        REDIS_URL=redis_url,
        BULLPEN_HOSTNAME="liveness-test",
        BULLPEN_DB_PATH=str(tmp_path / "absent.sqlite3"),
        BULLPEN_LIVENESS_FILE=str(alive),
        BULLPEN_LOG_FORMAT="json",
        PYTHONUNBUFFERED="1",
    )

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "runwebhooks", "--check-alive"]
            + ["--max-age", "3"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    log_path = tmp_path / "dispatcher.err"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runwebhooks"],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    try:
        wait_until(alive.exists, timeout=30)
        done = check()
        assert done.returncode == 0, done.stderr

        os.kill(proc.pid, signal.SIGSTOP)
        try:
            time.sleep(3.5)
            done = check()
            assert done.returncode == 1
            assert done.stderr.strip().startswith(f"not alive: {alive} is ")
            assert len(done.stderr.strip().splitlines()) == 1
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not alive.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    assert lines, "the dispatcher logged nothing"
    for line in lines:
        record = json.loads(line)
        assert {"time", "level", "logger", "message"} <= record.keys(), record
