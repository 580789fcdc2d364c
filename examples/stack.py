"""Start the pieces of Bullpen an example needs, on this machine, and stop
them again: a Redis, the Django API on daphne (with its own SQLite database
and an API token), the webhook dispatcher, a GPU supervisor on simulated
devices. The examples' `run.py` scripts and their tests use the same code.

Everything listens on 127.0.0.1, so the webhook receivers are loopback
addresses: the stack sets BULLPEN_WEBHOOK_ALLOW_PRIVATE=1 for its API and
dispatcher (local development only; see the README's Webhooks section).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dashboard.run import daphne_args
from gpu_workers.children import send_on_stdin

REPO = Path(__file__).resolve().parent.parent

#: Short heartbeats and reconcile periods, so scaling shows within a second.
FAST_SUPERVISOR = {
    "heartbeat_interval_s": 0.3,
    "heartbeat_ttl_s": 1.5,
    "reconcile_interval_s": 0.2,
    "control_interval_s": 0.05,
    "drain_timeout_s": 20.0,
}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll until `predicate()` is truthy (TimeoutError after `timeout` s)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Stack:
    """Processes of one example run; `close()` stops them all."""

    redis_url: str
    workdir: Path
    env_overrides: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    api_url: str = ""
    #: One key per stack: production settings need one, and every process of
    #: the stack must share it (sessions, tickets).
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(50))

    @property
    def env(self) -> dict[str, str]:
        """The environment of every process of the stack."""
        env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="dashboard.settings",
            PYTHONPATH=str(REPO),
            PYTHONUNBUFFERED="1",
            REDIS_URL=self.redis_url,
            BULLPEN_DB_PATH=str(self.workdir / "db.sqlite3"),
            DJANGO_SECRET_KEY=self.secret_key,
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
            BULLPEN_HOSTNAME="example-host",
            BULLPEN_WEBHOOK_ALLOW_PRIVATE="1",
        )
        env.update(self.env_overrides)
        return env

    def _start(
        self, name: str, args: list[str], stdin_text: str | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - closed by close()
        proc = subprocess.Popen(
            args,
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
            start_new_session=True,
        )
        log.close()
        if stdin_text is not None:
            send_on_stdin(proc, stdin_text)
        self.procs[name] = proc
        return proc

    def prepare_api(self, queues: str = "*") -> dict[str, Any]:
        """Migrate the example's database and issue a read/write token."""
        py = sys.executable
        subprocess.run(
            [py, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=REPO,
            env=self.env,
            check=True,
            capture_output=True,
        )
        out = subprocess.run(
            [
                py,
                "manage.py",
                "apitoken",
                "create",
                "--name",
                "example",
                "--queues",
                queues,
                "--scope",
                "read,write",
                "--json",
            ],
            cwd=REPO,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return dict(json.loads(out.strip().splitlines()[-1]))

    def start_api(self) -> str:
        """The API (and dashboard) on daphne; returns its base URL."""
        port = free_port()
        self._start(
            "api",
            [sys.executable, *daphne_args("127.0.0.1", port)],
        )
        self.api_url = f"http://127.0.0.1:{port}"
        wait_for(self._api_up, 30, "the API to answer")
        return self.api_url

    def _api_up(self) -> bool:
        try:
            with urllib.request.urlopen(
                self.api_url + "/api/v1/openapi.json", timeout=1
            ):
                return True
        except OSError:
            return False

    def start_dispatcher(self) -> None:
        """`manage.py runwebhooks`."""
        self._start("webhooks", [sys.executable, "manage.py", "runwebhooks"])

    def start_supervisor(
        self,
        queues: list[dict[str, Any]],
        gpus: str,
        handler_modules: list[str],
        host: str = "example-host",
    ) -> None:
        """A GPU supervisor (`python -m gpu_workers`) on simulated devices."""
        config = {
            "redis_url": self.redis_url,
            "host": host,
            "gpus": gpus,
            "queues": queues,
            "handler_modules": handler_modules,
            "log_dir": str(self.workdir),
            **FAST_SUPERVISOR,
        }
        # On stdin, not argv: the config holds the Redis URL (ps shows argv).
        self._start(
            "supervisor",
            [sys.executable, "-m", "gpu_workers", "--config", "-"],
            stdin_text=json.dumps(config),
        )

    def stop(self, name: str, timeout: float = 30.0) -> int | None:
        """SIGTERM one process (its group) and wait; SIGKILL after timeout."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return None
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait(10)
        except ProcessLookupError:
            return proc.wait(10)

    def close(self) -> None:
        """Stop every process."""
        for name in list(self.procs):
            self.stop(name, timeout=15)

    def logs(self) -> str:
        """Every process's log (for a failing test)."""
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
            for p in sorted(self.workdir.glob("*.log"))
        )
