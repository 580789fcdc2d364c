"""Redis restarting under a running worker: the worker reconnects and
processes jobs added after the restart (on a server of the test's own)."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from queues import Job, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread
from tests.redis_server import RedisServer


def _completed(url: str, qname: str) -> int:
    with Queue(qname, url) as q:
        return int(q.get_counts("completed")["completed"])


def test_worker_survives_redis_restart(own_redis: RedisServer, qname: str) -> None:
    """After a restart (down 0.5 s) the worker reconnects and runs the jobs
    added to the now empty server."""
    url = own_redis.url
    ran: list[Any] = []
    lock = threading.Lock()

    def processor(job: Job) -> Any:
        with lock:
            ran.append(job.data)
        return job.data

    with Queue(qname, url) as q:
        q.add("before", "before")
    with worker_thread(qname, processor, url, concurrency=2) as w:
        wait_until(lambda: _completed(url, qname) == 1, 10, what="the first job")
        own_redis.restart(down_s=0.5)  # no persistence: the restarted server is empty
        with Queue(qname, url) as q:
            q.add_bulk([{"name": "after", "data": f"after-{i}"} for i in range(5)])
        wait_until(
            lambda: _completed(url, qname) == 5,
            20,
            0.05,
            what="the jobs added after the restart",
        )
        assert w.alive
        # and it keeps going: a job added later is picked up at once
        with Queue(qname, url) as q:
            q.add("later", "later")
        wait_until(lambda: _completed(url, qname) == 6, 10, 0.02, what="a later job")
    assert sorted(ran) == [
        "after-0",
        "after-1",
        "after-2",
        "after-3",
        "after-4",
        "before",
        "later",
    ]


def test_worker_survives_restart_while_idle_and_blocked(
    own_redis: RedisServer, qname: str
) -> None:
    """A worker blocked on the marker (no jobs yet) also recovers."""
    url = own_redis.url
    with worker_thread(qname, lambda job: job.data, url) as w:
        wait_until(lambda: _completed(url, qname) == 0, 5)  # let it block
        threading.Event().wait(0.3)
        own_redis.restart()
        with Queue(qname, url) as q:
            q.add("after", 1)
        wait_until(
            lambda: _completed(url, qname) == 1,
            20,
            0.05,
            what="the job added after the restart",
        )
        assert w.alive


BUSY_LUA = """
local t0 = redis.call("TIME")
while true do
  local t = redis.call("TIME")
  if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > tonumber(ARGV[1]) * 1000 then
    return 1
  end
end
"""


def _wait_for_renewal(r: redis.Redis, lock_key: str, timeout: float = 5.0) -> float:
    """Block until the lock's TTL jumps up (the worker renewed it); the time then."""
    last = r.pttl(lock_key)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ttl = r.pttl(lock_key)
        if ttl > last + 100:
            return time.monotonic()
        last = ttl
        time.sleep(0.002)
    raise AssertionError(f"{lock_key} was not renewed within {timeout}s")


def test_worker_survives_busy_redis(own_redis: RedisServer, qname: str) -> None:
    """Another client's long Lua script makes Redis answer BUSY to everyone
    for 0.8 s, starting 0.4 s after a lock renewal (lock_duration 2 s): the
    worker keeps claiming and finishing jobs afterwards instead of dying, and
    its long job keeps its lock instead of stalling."""
    url = own_redis.url
    admin = redis.Redis.from_url(url, decode_responses=True)
    admin.config_set("busy-reply-threshold", 50)  # answer BUSY after 50 ms
    done: list[Any] = []
    lock = threading.Lock()

    def processor(job: Job) -> Any:
        time.sleep(job.data)
        with lock:
            done.append(job.id)

    with Queue(qname, url) as q:
        long_job = q.add("long", 3.0)
        q.add_bulk([{"name": "short", "data": 0.02} for _ in range(100)])
        with worker_thread(
            qname,
            processor,
            url,
            concurrency=2,
            lock_duration=2000,
            stalled_interval=1000,
        ) as w:
            wait_until(lambda: len(done) >= 10, 10, what="some short jobs")
            renewed_at = _wait_for_renewal(admin, q.keys.lock(long_job.id))
            time.sleep(max(renewed_at + 0.4 - time.monotonic(), 0))
            assert admin.eval(BUSY_LUA, 0, 800) == 1
            wait_until(
                lambda: q.get_counts("completed")["completed"] == 101,
                20,
                0.05,
                what="every job after the busy script",
            )
            assert w.alive
        job = q.get_job(long_job.id)
        assert job.stalled_counter == 0 and job.attempts_started == 1
        assert sorted(done, key=int) == [str(i) for i in range(1, 102)]
        assert q.get_counts("active", "waiting", "failed") == {
            "active": 0,
            "waiting": 0,
            "failed": 0,
        }
    admin.close()
