"""Redis answers a worker waits out (queues.outages): OOM at maxmemory,
READONLY on a replica, and every other refusal code Redis may clear by
itself; the producer gets a clear error instead."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
import redis

from queues import Job, Queue
from queues.exceptions import RedisUnavailable
from queues.outages import Outage, backoff_s, recoverable
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread
from tests.redis_server import RedisServer

#: Codes Redis answers that clear by themselves, and one that does not.
CODES = [
    "OOM",
    "MISCONF",
    "READONLY",
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "MASTERDOWN",
    "NOREPLICAS",
    "UNBLOCKED",
]


@pytest.mark.parametrize("code", CODES)
def test_refusals_redis_may_clear_are_recoverable(r: redis.Redis, code: str) -> None:
    """Each code, as a real Redis error reply parsed by redis-py, is one to
    wait out; a wrong-type error or a script bug is not."""
    with pytest.raises(redis.RedisError) as caught:  # LOADING: a ConnectionError
        r.eval(f"return redis.error_reply('{code} try later')", 0)
    assert recoverable(caught.value)
    r.set("x", "text")
    with pytest.raises(redis.ResponseError) as wrong:
        r.incr("x")
    assert not recoverable(wrong.value)


def test_outage_logs_once_and_backs_off_with_jitter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ten failures in a row log one line; the answer afterwards one more;
    delays double up to the cap and are jittered."""
    outage = Outage("worker x", logging.getLogger("test.outage"))
    with caplog.at_level(logging.WARNING, "test.outage"):
        delays = [outage.failed(redis.ConnectionError("down")) for _ in range(10)]
        outage.succeeded()
        outage.succeeded()
    assert [r.getMessage()[:30] for r in caplog.records] == [
        "worker x: Redis unavailable (d",
        "worker x: Redis answers again ",
    ]
    assert 0.05 <= delays[0] <= 0.1 and max(delays) <= 5.0 and delays[-1] >= 2.5
    assert len({backoff_s(8) for _ in range(20)}) > 1


def _completed(q: Queue) -> int:
    return int(q.get_counts("completed")["completed"])


def test_idle_worker_waits_out_maxmemory(
    own_redis: RedisServer, qname: str, caplog: pytest.LogCaptureFixture
) -> None:
    """At maxmemory (noeviction) an idle worker's claims are refused with
    OOM: it logs once, keeps running, and takes jobs once memory is freed;
    a producer meanwhile gets RedisUnavailable, which says what happened."""
    admin = redis.Redis.from_url(own_redis.url, decode_responses=True)
    with Queue(qname, own_redis.url) as q, caplog.at_level(logging.WARNING):
        with worker_thread(
            qname, lambda job: job.data, own_redis.url, drain_delay=0.1
        ) as w:
            q.add("before", 1)
            wait_until(lambda: _completed(q) == 1, 10, what="the first job")
            admin.config_set("maxmemory-policy", "noeviction")
            admin.config_set("maxmemory", 1)
            with pytest.raises(RedisUnavailable, match="out of memory|OOM"):
                q.add("refused", 2)
            time.sleep(1.5)  # several claims refused (drain_delay 0.1 s)
            assert w.alive
            admin.config_set("maxmemory", 0)
            q.add("after", 3)
            wait_until(lambda: _completed(q) == 2, 10, what="the job after")
            assert w.alive
    unavailable = [r for r in caplog.records if "Redis unavailable" in r.getMessage()]
    assert len(unavailable) == 1, [r.getMessage() for r in caplog.records]
    admin.close()


def test_worker_waits_out_a_read_only_replica(
    own_redis: RedisServer, qname: str
) -> None:
    """The server becomes a replica (READONLY to every write, as after a
    failover) and then a master again: the worker runs jobs added after."""
    master = RedisServer().start()
    admin = redis.Redis.from_url(own_redis.url, decode_responses=True)
    ran: list[Any] = []
    lock = threading.Lock()

    def processor(job: Job) -> Any:
        with lock:
            ran.append(job.data)

    try:
        with worker_thread(qname, processor, own_redis.url, drain_delay=0.1) as w:
            time.sleep(0.3)
            admin.replicaof("127.0.0.1", master.port)
            wait_until(
                lambda: admin.info("replication")["master_link_status"] == "up",
                10,
                what="the replica link",
            )
            time.sleep(1.0)  # claims refused with READONLY
            assert w.alive
            admin.replicaof("NO", "ONE")
            with Queue(qname, own_redis.url) as q:
                q.add("after", "after")
                wait_until(lambda: _completed(q) == 1, 10, what="the job after")
            assert w.alive
        assert ran == ["after"]
    finally:
        admin.close()
        master.stop()
