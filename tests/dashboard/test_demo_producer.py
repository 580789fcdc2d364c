"""make run's demo producer (dashboard/demo.py) waits out a Redis outage
instead of exiting: make run stops everything when one of its processes
exits, so a Redis that stalled for a second used to take the demo down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from dashboard.demo import BACKLOG_TARGET
from queues import Queue
from queues.devredis import RedisServer
from tests.dashboard.daphne_helpers import TEST_SECRET_KEY
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


def backlog(queue: Queue) -> int:
    """The demo queue's jobs that count towards its backlog target (grouped
    ones included)."""
    return sum(queue.get_counts("waiting", "prioritized", "delayed").values())


def test_the_demo_producer_outlives_a_redis_restart(tmp_path: Path) -> None:
    """The producer fills its backlog; Redis goes away for three seconds and
    comes back empty (no persistence): the producer is still running, says
    once that Redis was unavailable and once that it answers again, fills
    the backlog again, and stops cleanly on SIGTERM."""
    server = RedisServer().start()
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"},
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DJANGO_SECRET_KEY": TEST_SECRET_KEY,
        "REDIS_URL": server.url,
    }
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        demo = subprocess.Popen(
            [sys.executable, "-m", "dashboard.demo", "demo"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    queue = Queue("demo", server.url)
    try:
        wait_until(
            lambda: backlog(queue) >= BACKLOG_TARGET,
            timeout=30,
            what="the demo backlog",
        )
        server.restart(down_s=3)
        wait_until(
            lambda: demo.poll() is not None or backlog(queue) >= 3,
            timeout=30,
            what="the demo producer to add jobs again",
        )
        assert demo.poll() is None, log.read_text()
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(15) == 0, log.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        queue.close()
        server.stop()
    text = log.read_text()
    assert text.count("demo producer: Redis unavailable") == 1, text
    assert text.count("demo producer: Redis answers again") == 1, text
    assert "Traceback" not in text, text
