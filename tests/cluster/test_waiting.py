"""Why a job waits, on a 3-primary Redis Cluster: the one pipeline of a
queue's and a job's facts also reads the GPU worker's record of the job (in
another slot), and the job page and the API's reasoning still name the code."""

from __future__ import annotations

import pytest
from django.test import Client
from redis.cluster import RedisCluster

from gpu_workers.waiting import explain
from queues import Queue
from queues.connection import sync_client
from tests.dashboard.helpers import job_url
from tests.gpu_workers.waiting_helpers import GiB, demo_job, gpu_worker


@pytest.mark.django_db
def test_reasons_read_across_slots(
    r: RedisCluster, dashboard_redis: str, qname: str, admin_client: Client
) -> None:
    """A job whose handler declares 10 GiB, on a queue whose only GPU worker
    has 6 GiB uncommitted, waits for VRAM; one whose earlier attempt a worker
    recorded at 2 GiB (a key of another slot) is next in line."""
    q = Queue(qname, dashboard_redis)
    gpu_worker(r, q, budget=21 * GiB, committed=15 * GiB)
    big = demo_job(q, "10GiB")
    small = q.add("other", {})
    r.hset(f"bullpen:job:bull:{qname}:{small.id}", "declared_bytes", 2 * GiB)
    conn = sync_client(dashboard_redis)
    found = explain(
        conn,
        "bull",
        qname,
        [(q.get_job(big.id), "waiting"), (q.get_job(small.id), "waiting")],
        handler_modules=("gpu_workers.demo_handlers",),
    )
    assert found[big.id].code == "waiting_for_vram"
    assert found[big.id].numbers["most_uncommitted_bytes"] == 6 * GiB
    assert found[small.id].code == "queued" and found[small.id].numbers["ahead"] == 1
    page = admin_client.get(job_url(q, big.id)).content.decode()
    assert 'data-waiting-code="waiting_for_vram"' in page
    q.close()
