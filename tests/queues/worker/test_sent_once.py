"""Claims and finishes are sent once: a Redis that stalls longer than the
user's client read timeout does not make redis-py send move_to_finished
again (which would report the job "not saved" and strand the job it claimed
in active)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

import pytest
import redis

from queues import Job, Queue, Worker
from tests.helpers import wait_until
from tests.queues.worker.helpers import WorkerThread
from tests.redis_server import RedisServer

STALL_S = 1.5


@pytest.mark.parametrize("given", ["client", "url"])
def test_a_stall_past_the_read_timeout_sends_no_finish_twice(
    own_redis: RedisServer, qname: str, caplog: pytest.LogCaptureFixture, given: str
) -> None:
    """The user's client (or URL) reads with a 0.3 s timeout and redis-py's
    default retries; Redis stops (SIGSTOP) for 1.5 s as a job finishes. The
    jobs complete at once afterwards, each saved by its first finish, and
    nothing is left in active."""
    assert own_redis.proc is not None
    pid = own_redis.proc.pid
    resumed = threading.Event()

    def resume() -> None:
        os.kill(pid, signal.SIGCONT)
        resumed.set()

    def processor(job: Job) -> Any:
        if job.data == "stall":
            os.kill(pid, signal.SIGSTOP)
            threading.Timer(STALL_S, resume).start()
        return job.data

    user_client = redis.Redis(port=own_redis.port, socket_timeout=0.3)
    connection: Any = user_client
    if given == "url":
        connection = f"{own_redis.url}?socket_timeout=0.3"
    handle = WorkerThread(Worker(qname, processor, connection=connection))
    try:
        with caplog.at_level(logging.WARNING, "queues.worker"):
            handle.thread.start()
            with Queue(qname, own_redis.url) as q:
                # A first job loads the scripts (a NOSCRIPT reply would hide
                # a re-sent EVALSHA).
                q.add("warm", "warm")
                wait_until(lambda: q.get_counts("completed")["completed"] == 1)
                q.add_bulk([{"name": n, "data": n} for n in ("stall", "next")])
                wait_until(resumed.is_set, 10, what="Redis to be resumed")
                wait_until(
                    lambda: q.get_counts("completed")["completed"] == 3,
                    5,
                    0.05,
                    what="both jobs (the second claimed by the first's finish)",
                )
                assert q.get_counts("active") == {"active": 0}
            handle.stop()
    finally:
        os.kill(pid, signal.SIGCONT)
        if handle.alive:  # a failed assertion: do not leave it running
            handle.worker.close(force=True)
            handle.thread.join(10)
        user_client.close()
    not_saved = [
        r.getMessage() for r in caplog.records if "not saved" in r.getMessage()
    ]
    assert not_saved == []
