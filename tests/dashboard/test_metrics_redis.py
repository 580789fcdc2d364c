"""/metrics' Redis families and connected-worker counts, against the real
test Redis: what INFO and CONFIG say, and the workers CLIENT LIST names."""

from __future__ import annotations

import time

import pytest
import redis

from queues import Queue
from tests.dashboard.test_metrics import samples, scrape, value
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread

pytestmark = pytest.mark.django_db


def test_redis_memory_policy_and_clients_are_the_servers(
    dashboard_redis: str,
) -> None:
    """Used memory is INFO's (within what one scrape allocates), the limit and
    policy are CONFIG's, and changing them shows on the next scrape."""
    r = redis.Redis.from_url(dashboard_redis)
    before = r.config_get("maxmemory", "maxmemory-policy")
    try:
        r.config_set("maxmemory", 512 * 2**20)
        r.config_set("maxmemory-policy", "allkeys-lru")
        families = scrape()
        info = r.info()
        used = families["bullpen_redis_memory_used_bytes"]
        (sample,) = used.samples
        node = sample.labels["node"]
        port = r.connection_pool.connection_kwargs["port"]
        assert node.endswith(f":{port}")
        assert abs(sample.value - info["used_memory"]) < 2 * 2**20
        assert value(families["bullpen_redis_memory_max_bytes"]) == 512 * 2**20
        policy = families["bullpen_redis_maxmemory_policy"]
        assert [(s.labels["policy"], s.value) for s in policy.samples] == [
            ("allkeys-lru", 1)
        ]
        evicted = families["bullpen_redis_evicted_keys"]
        assert (
            value(evicted, "bullpen_redis_evicted_keys_total") == info["evicted_keys"]
        )
        clients = value(families["bullpen_redis_connected_clients"])
        assert clients >= 2  # this test's and the dashboard's

        r.config_set("maxmemory", 0)
        r.config_set("maxmemory-policy", "noeviction")
        families = scrape()
        assert value(families["bullpen_redis_memory_max_bytes"]) == 0
        policy = families["bullpen_redis_maxmemory_policy"]
        assert [s.labels["policy"] for s in policy.samples] == ["noeviction"]
    finally:
        r.config_set("maxmemory", before["maxmemory"])
        r.config_set("maxmemory-policy", before["maxmemory-policy"])
        r.close()


def test_queue_workers_counts_the_connected_workers(
    dashboard_redis: str, qname: str
) -> None:
    """0 with a backlog and no worker; 2 while two workers are connected
    (what Node's getWorkers() lists); 0 again once they have gone."""
    from queues.clients import forget_censuses

    q = Queue(qname, dashboard_redis)
    q.add("x", {})
    key = f"bull:{qname}"

    def workers() -> float:
        forget_censuses()  # the census is reused for a few seconds
        return value(scrape()["bullpen_queue_workers"], queue=key)

    assert workers() == 0

    def slow(job: object) -> None:
        time.sleep(0.05)

    with (
        worker_thread(qname, slow, dashboard_redis),
        worker_thread(qname, slow, dashboard_redis),
    ):
        wait_until(lambda: workers() == 2, 10, what="two workers counted")
        others = samples(scrape()["bullpen_queue_workers"])
        assert {s.labels["queue"] for s in others} >= {key}
    wait_until(lambda: workers() == 0, 10, what="no worker counted")
    q.close()
