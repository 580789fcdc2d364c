"""`manage.py runwebhooks` SIGKILLed while events stream in loses no
webhook: the restarted dispatcher delivers every event at least once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from dashboard.api import store
from dashboard.api.webhooks import registry
from tests.api.helpers import Receiver
from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]
EVENTS = 300


def start_dispatcher(redis_url: str, tmp_path: Path, n: int) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        REDIS_URL=redis_url,
        # The receiver listens on 127.0.0.1: this test allows private
        # destinations explicitly (the refusal is tested elsewhere).
        BULLPEN_WEBHOOK_ALLOW_PRIVATE="1",
        BULLPEN_WEBHOOK_LOCK_DURATION_MS="1000",
        BULLPEN_WEBHOOK_BACKOFF_MS="100",
        BULLPEN_HOSTNAME="kill-test",
        # No database here: the dispatcher needs only Redis.
        BULLPEN_DB_PATH=str(tmp_path / "absent.sqlite3"),
        PYTHONUNBUFFERED="1",
    )
    log = open(tmp_path / f"dispatcher-{n}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "manage.py", "runwebhooks"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_no_webhook_lost_when_the_dispatcher_is_killed_mid_stream(
    redis_url: str, r: redis.Redis, qname: str, tmp_path: Path
) -> None:
    """300 events arrive while the dispatcher delivers them to a slow receiver;
    it is SIGKILLed part-way and started again: every event reaches the
    receiver (at least once; duplicates only for deliveries cut mid-send)."""
    receiver = Receiver(behaviour=lambda i, req: (time.sleep(0.004), (200, {}))[1])
    registry.mirror_subscription(
        store.client(),
        store.keys(),
        {
            "id": 1,
            "prefix": "bull",
            "queue": qname,
            "url": receiver.url(),
            "events": ["completed"],
            "secret": "whsec_test",
            "active": True,
        },
    )
    stream = f"bull:{qname}:events"
    produced: list[str] = []

    def produce() -> None:
        for i in range(EVENTS):
            produced.append(
                str(
                    r.xadd(
                        stream,
                        {"event": "completed", "jobId": f"j{i}", "returnvalue": "1"},
                    )
                )
            )
            time.sleep(0.003)

    first = start_dispatcher(redis_url, tmp_path, 1)
    second = None
    producer = threading.Thread(target=produce)
    try:
        wait_until(
            lambda: r.exists("bull:bullpen-webhooks:meta") or r.xinfo_groups(stream),
            timeout=20,
            what="the dispatcher to start",
        )
        producer.start()
        wait_until(lambda: len(receiver.requests) >= 60, timeout=30, what="60 webhooks")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        at_kill = len(receiver.requests)
        assert at_kill < EVENTS, "killed too late to test anything"
        second = start_dispatcher(redis_url, tmp_path, 2)
        producer.join(30)
        wait_until(
            lambda: {q.json["event_id"] for q in receiver.requests} >= set(produced),
            timeout=60,
            what="every event delivered",
        )
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        receiver.close()
        for log in sorted(tmp_path.glob("dispatcher-*.log")):
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
    delivered = [q.json["event_id"] for q in receiver.requests]
    assert set(delivered) == set(produced)
    duplicates = len(delivered) - len(set(delivered))
    assert duplicates <= 8, (
        f"{duplicates} duplicates (at most one per running delivery)"
    )
    print(f"killed after {at_kill} of {EVENTS} deliveries; {duplicates} duplicate(s)")
