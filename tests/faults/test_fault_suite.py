"""Redis faults under a producer and 3 worker processes: every acknowledged
add completes, no worker process exits, nothing is left active."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from queues import Queue
from tests.faults import harness
from tests.helpers import wait_until
from tests.redis_server import RedisServer


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own that persists to an AOF."""
    server = harness.aof_server()
    yield server
    server.stop()


@pytest.mark.slow  # load/soak: make test runs it, make test-fast does not
def test_every_acknowledged_add_completes_through_redis_faults(
    aof_redis: RedisServer, qname: str, tmp_path: Path
) -> None:
    """SHUTDOWN and restart (AOF), SIGSTOP beyond the lock duration, CLIENT
    KILL of every connection and maxmemory reached then lifted, one after
    the other under a producer and 3 `python -m queues worker` processes."""
    url = aof_redis.url
    workers = harness.Workers(url, qname, tmp_path)
    workers.wait_ready(url, qname)
    producer = harness.Producer(url, qname).start()
    admin = redis.Redis.from_url(url, decode_responses=True)
    try:
        wait_until(lambda: len(producer.acked) >= 20, 20, what="the first adds")
        for name, fault in harness.FAULTS.items():
            fault(aof_redis, admin)
            admin.close()  # its connection may have been killed or restarted
            time.sleep(1.0)  # the producer keeps adding meanwhile
            assert workers.exited() == [], f"after {name}:\n{workers.log_text()}"
            harness.settle(url, qname)
        producer.stop()
        harness.settle(url, qname)
        missing = harness.not_completed(url, qname, producer.acked)
        assert missing == [], workers.log_text()
        with Queue(qname, url) as q:
            counts = q.get_counts("active", "failed", "wait")
        assert counts == {"active": 0, "failed": 0, "waiting": 0}
        assert workers.exited() == []
    finally:
        producer.stop()
        statuses = workers.stop()
        admin.close()
    assert statuses == [0, 0, 0], workers.log_text()
    assert len(producer.acked) > 100
