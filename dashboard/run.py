"""`make run`: Redis (REDIS_URL, else a local redis-server started here),
SQLite migrations, an admin user, the dashboard on daphne, and the demo."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from queues.devredis import RedisServer

HOST = os.environ.get("BULLPEN_HOST", "127.0.0.1")
PORT = os.environ.get("BULLPEN_PORT", "8000")


def main() -> None:
    """Start everything and stop it all on Ctrl-C."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="dashboard.settings")
    server = None
    if not env.get("REDIS_URL"):
        server = RedisServer().start()
        env["REDIS_URL"] = server.url
        print(f"started redis-server at {server.url} (no persistence)", flush=True)
    py = sys.executable
    subprocess.run([py, "manage.py", "migrate", "--noinput", "-v", "0"], env=env, check=True)
    subprocess.run([py, "-c", (
        "import django; django.setup();"
        "from django.contrib.auth.models import User;"
        "User.objects.filter(username='admin').exists() or "
        "User.objects.create_superuser('admin', '', 'admin')")], env=env, check=True)
    procs = [
        subprocess.Popen([py, "-m", "daphne", "-b", HOST, "-p", PORT,
                          "dashboard.asgi:application"], env=env),
        subprocess.Popen([py, "-m", "dashboard.demo", env["REDIS_URL"]], env=env),
    ]
    print(f"dashboard: http://{HOST}:{PORT}/  (login admin / admin)", flush=True)
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
