"""daphne stops on SIGTERM while requests are in flight (make run's stop,
Ctrl-C, a rolling restart), instead of hanging until SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

from django.conf import settings
from django.utils.module_loading import import_string

from tests.dashboard.daphne_helpers import daphne
from tests.helpers import wait_until

POLLERS = 40


def test_every_middleware_is_async_capable() -> None:
    """A sync-only middleware sends each ASGI request through asgiref's
    thread bridge, whose threads the interpreter's exit then waits for."""
    sync_only = [
        path
        for path in settings.MIDDLEWARE
        if not getattr(import_string(path), "async_capable", False)
    ]
    assert not sync_only


def test_sigterm_under_40_polling_clients_exits_cleanly(
    tmp_path: Path, redis_url: str
) -> None:
    """40 clients poll the API and a page; SIGTERM ends daphne within
    seconds with status 0."""
    with daphne(tmp_path, redis_url) as server:
        stop = threading.Event()
        answered = [0]

        def poll(path: str) -> None:
            while not stop.is_set():
                try:
                    with urllib.request.urlopen(server.url + path, timeout=5):
                        pass
                except urllib.error.HTTPError:
                    pass
                except OSError:
                    if server.proc.poll() is not None:
                        return
                answered[0] += 1

        paths = ["/api/v1/queues", "/", "/login/", "/metrics"]
        threads = [
            threading.Thread(target=poll, args=(paths[i % len(paths)],), daemon=True)
            for i in range(POLLERS)
        ]
        for t in threads:
            t.start()
        try:
            # Every client served at least about once before the signal (how
            # soon is the machine's speed: 2 s gave 30 answers at load 10).
            wait_until(
                lambda: answered[0] > POLLERS,
                timeout=60,
                what="the clients to be served",
            )
            server.proc.send_signal(signal.SIGTERM)
            try:
                code = server.proc.wait(15)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    "daphne still running 15 s after SIGTERM"
                ) from None
            assert code == 0, server.log_text()[-2000:]
        finally:
            stop.set()
            for t in threads:
                t.join(10)
