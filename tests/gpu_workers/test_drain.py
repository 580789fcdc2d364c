"""`python -m gpu_workers drain` (the GPU pod's preStop hook) against a real
supervisor on a simulated GPU: it returns only once the supervisor stopped
taking jobs and its running job finished; a job queued meanwhile stays
waiting for the next supervisor."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from queues import Queue
from tests.gpu_workers.helpers import SupervisorProcess, supervisor_config
from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]


def run_drain(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the drain command; its exit status and stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "gpu_workers", "drain", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stderr.strip()


def test_drain_waits_for_the_running_job_and_takes_no_new_one(
    redis_url: str, q: Queue, tmp_path: Path
) -> None:
    """The running 2 s job completes (not stalled, not cut short) before drain
    exits 0; the supervisor has exited and removed its liveness file; a job
    added after the drain began is still waiting."""
    alive = tmp_path / "supervisor.alive"
    config = supervisor_config(
        redis_url,
        [{"queue": q.name, "slots": 1, "workers": 1}],
        host="drain-host",
        liveness_file=str(alive),
    )
    supervisor = SupervisorProcess(config, tmp_path / "supervisor.log")
    try:
        wait_until(alive.exists, timeout=20)
        running = q.add("test.sleep", {"s": 2.0})
        wait_until(
            lambda: q.get_job_state(running.id) == "active",
            timeout=20,
            what="the job to start",
        )
        started = time.monotonic()
        drain = subprocess.Popen(
            [sys.executable, "-m", "gpu_workers", "drain", "--timeout", "30"],
            cwd=REPO,
            env={**os.environ, "BULLPEN_LIVENESS_FILE": str(alive)},
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: "draining" in supervisor.log(), timeout=10, what="the drain")
        later = q.add("test.sleep", {"s": 0.1})
        _, err = drain.communicate(timeout=40)
        elapsed = time.monotonic() - started
        assert drain.returncode == 0, (err, supervisor.log())
        assert err.strip().endswith(f"supervisor {supervisor.pid} drained"), err
        assert q.get_job_state(running.id) == "completed"
        assert q.get_job(running.id).returnvalue == {"slept": 2.0}
        assert q.get_job_state(later.id) == "waiting"
        assert elapsed < 15, elapsed
        assert not alive.exists()
        assert supervisor.proc.wait(10) == 0
    finally:
        supervisor.close()


def test_drain_without_a_supervisor(tmp_path: Path) -> None:
    """No liveness file: nothing to drain (0); no path given: 2; a stuck
    supervisor (a live process that ignores SIGTERM) is reported after
    --timeout with 1."""
    missing = tmp_path / "none.alive"
    assert run_drain("--liveness-file", str(missing)) == (
        0,
        f"drain: {missing} is missing: no supervisor is running",
    )
    code, err = run_drain(env={"BULLPEN_LIVENESS_FILE": ""})
    assert code == 2 and "no liveness file given" in err
    stuck = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            " print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stuck.stdout is not None and stuck.stdout.readline() == "ready\n"
        named = tmp_path / "stuck.alive"
        named.write_text(f"{time.time():.3f} {stuck.pid}\n")
        code, err = run_drain("--liveness-file", str(named), "--timeout", "0.5")
        assert code == 1
        assert err == f"drain: supervisor {stuck.pid} still draining after 0.5 s"
        assert stuck.poll() is None
    finally:
        stuck.kill()
        stuck.wait(10)
