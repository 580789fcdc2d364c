"""A GPU worker waits out Redis refusals from its first heartbeat on."""

from __future__ import annotations

import time

import pytest
import redis

from queues import Queue
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers test.sleep
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until
from tests.redis_server import RedisServer


def test_gpu_worker_started_at_maxmemory_waits_and_then_works(
    own_redis: RedisServer, admin: redis.Redis, qname: str
) -> None:
    """Started while Redis is at maxmemory (its first heartbeat is refused
    with OOM), the GPU worker process stays up; once memory is freed it
    heartbeats and runs jobs."""
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    worker = WorkerThread(make_spec(own_redis.url, qname))
    try:
        time.sleep(1.0)
        assert worker.alive, worker.error
        admin.config_set("maxmemory", 0)
        with Queue(qname, own_redis.url) as q:
            job = q.add("test.sleep", {"s": 0.05})
            wait_until(
                lambda: q.get_job_state(job.id).value == "completed",
                10,
                what="the job after memory was freed",
            )
    finally:
        worker.stop()


@pytest.mark.parametrize("name", ["test.sleep", "test.async_sleep"])
def test_gpu_job_outlives_progress_writes_refused_at_maxmemory(
    own_redis: RedisServer, admin: redis.Redis, qname: str, name: str
) -> None:
    """A running GPU job whose progress writes Redis refuses (OOM at
    maxmemory) skips them and runs on: once memory is freed it completes on
    its first attempt instead of failing for a progress update."""
    admin.config_set("maxmemory-policy", "noeviction")
    worker = WorkerThread(make_spec(own_redis.url, qname))
    try:
        with Queue(qname, own_redis.url) as q:
            job = q.add(name, {"s": 2.0}, attempts=1)
            wait_until(
                lambda: q.get_job_state(job.id).value == "active",
                10,
                what="the job running",
            )
            admin.config_set("maxmemory", 1)  # its progress writes are refused
            time.sleep(1.0)
            admin.config_set("maxmemory", 0)
            wait_until(
                lambda: q.get_job_state(job.id).value in ("completed", "failed"),
                15,
                what="the job's end",
            )
            done = q.get_job(job.id)
            assert done is not None
            assert (q.get_job_state(job.id).value, done.failed_reason) == (
                "completed",
                None,
            )
            assert worker.alive, worker.error
    finally:
        worker.stop()
