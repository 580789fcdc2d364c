"""The dashboard, discovery, getWorkers and a GPU supervisor on a 3-primary
Redis Cluster: queues placed on different primaries (one hash tag each) with
jobs in every state are found by the SCAN of every primary, and the overview,
queue pages, job pages, /metrics and the GPU page read them right."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import Client
from redis.cluster import RedisCluster

from dashboard.console import reads
from dashboard.console.reads import overview
from dashboard.shared import discovery
from gpu_workers import Fleet
from gpu_workers.keys import BullpenKeys
from queues import AsyncQueue, FlowProducer, Queue
from queues.clients import connection_name
from queues.devredis import free_port
from queues.discovery import discover_queues
from tests.dashboard.helpers import (
    beat,
    job_url,
    make_active,
    queue_url,
    ready_workers,
    run_jobs,
    simulated_supervisor,
)
from tests.dashboard.test_metrics import samples, scrape, value
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread

STATES = (
    "active",
    "completed",
    "delayed",
    "failed",
    "prioritized",
    "waiting",
    "waiting-children",
)


def on_each_primary(r: RedisCluster) -> list[str]:
    """One fresh queue name per primary, each with its own hash tag."""
    run = uuid.uuid4().hex[:6]
    by_node: dict[str, str] = {}
    for i in range(1000):
        name = f"{{{run}{i}}}"
        by_node.setdefault(r.get_node_from_key(f"bull:{name}:meta").name, name)
    assert len(by_node) == len(r.get_primaries()) == 3
    return list(by_node.values())


def fill(q: Queue, k: int) -> dict[str, int]:
    """Jobs in every state, `k` extra waiting ones so the queues differ; the
    counts per state."""
    run_jobs(q, 2, "failed")
    run_jobs(q, 1, "completed", value={"ok": 1})
    make_active(q)
    q.add_bulk([{"name": "w", "data": {"i": i}} for i in range(1 + k)])
    q.add("p", {}, priority=2)
    q.add("d", {}, delay=600_000)
    FlowProducer(q.client, prefix=q.prefix).add(
        {
            "name": "parent",
            "queue_name": q.name,
            "data": {},
            "children": [{"name": "child", "queue_name": q.name, "data": {}}],
        }
    )
    # The flow's child waits too.
    return {
        "active": 1,
        "completed": 1,
        "delayed": 1,
        "failed": 2,
        "prioritized": 1,
        "waiting": 2 + k,
        "waiting-children": 1,
    }


@pytest.fixture
def filled(
    dashboard_redis: str, r: RedisCluster
) -> Iterator[list[tuple[Queue, dict[str, int]]]]:
    """A queue on each primary with jobs in every state."""
    queues = [Queue(name, dashboard_redis) for name in on_each_primary(r)]
    yield [(q, fill(q, k)) for k, q in enumerate(queues)]
    for q in queues:
        q.close()


def _row(html: str, key: str) -> str:
    row = html[html.index(f'data-queue="{key}"') :]
    return row[: row.index("</tr>")]


def _count(html: str, key: str, state: str) -> int:
    return int(html.split(f'data-live-count="{key}:{state}">')[1].split("<")[0])


def test_discovery_scans_every_primary(r: RedisCluster, redis_url: str) -> None:
    """Queues whose slots sit on each of the three primaries, under `bull` and
    under BullMQ's `{bull}` convention, are all found."""
    names = on_each_primary(r)
    for name in names:
        Queue(name, redis_url).add("x", {})
    Queue("plain", redis_url, "{bull}").add("x", {})
    Queue("other", redis_url, "{bull}").add("x", {})
    found = discover_queues(r, ["bull", "{bull}"], scan_count=10)
    assert found == sorted(
        [("bull", n) for n in names] + [("{bull}", "plain"), ("{bull}", "other")]
    )


@pytest.mark.django_db
def test_pages_read_queues_on_every_primary(
    filled: list[tuple[Queue, dict[str, int]]], admin_client: Client
) -> None:
    """The overview lists each queue with its counts; each queue page's tabs
    count and list every state; a job page shows its job; /metrics counts
    them all."""
    html = admin_client.get("/").content.decode()
    for q, counts in filled:
        key = f"bull:{q.name}"
        row = _row(html, key)
        assert {s: _count(row, key, s) for s in STATES} == counts
        assert "1 completed, 2 failed" in row

        page = admin_client.get(queue_url(q))
        assert page.status_code == 200
        text = page.content.decode()
        assert {s: _count(text, key, s) for s in STATES} == counts
        for state, n in counts.items():
            tab = admin_client.get(queue_url(q), {"state": state})
            assert tab.status_code == 200, state
            assert tab.content.decode().count('<tr data-job="') == n, state

        failed = q.get_jobs(["failed"])[0]
        job = admin_client.get(job_url(q, failed.id))
        assert job.status_code == 200
        assert "boom" in job.content.decode()

    families = scrape()
    for q, counts in filled:
        jobs = families["bullpen_queue_jobs"]
        got = {
            s.labels["state"]: s.value for s in samples(jobs, queue=f"bull:{q.name}")
        }
        assert got == counts
        run = families["bullpen_job_run_duration_seconds"]
        buckets = {
            s.labels["le"]: s.value for s in samples(run, queue=f"bull:{q.name}")
        }
        assert buckets["+Inf"] == 3  # the 1 completed and 2 failed jobs


@pytest.mark.django_db
def test_metrics_report_the_memory_of_every_primary(
    dashboard_redis: str, r: RedisCluster
) -> None:
    """One Redis memory sample per primary, each that node's own INFO."""
    families = scrape()
    used = {
        s.labels["node"]: s.value
        for s in families["bullpen_redis_memory_used_bytes"].samples
    }
    primaries = r.get_primaries()
    assert set(used) == {f"{n.host}:{n.port}" for n in primaries}
    for node in primaries:
        info = r.info(target_nodes=node)
        assert abs(used[f"{node.host}:{node.port}"] - info["used_memory"]) < 2 * 2**20
    policies = families["bullpen_redis_maxmemory_policy"].samples
    assert len(policies) == len(primaries)


@pytest.mark.django_db
def test_a_queue_without_a_hash_tag_is_listed_apart(
    dashboard_redis: str, r: RedisCluster, admin_client: Client, qname: str
) -> None:
    """Keys of a queue without a hash tag (written by hand: no client makes
    them on a cluster) cannot be read there: the overview and /metrics leave
    it out, saying why, and its page is 404, while other queues still show."""
    r.hset("bull:plain:meta", "opts.maxLenEvents", 10000)
    Queue(qname, dashboard_redis).add("x", {})
    html = admin_client.get("/").content.decode()
    assert f'data-queue="bull:{qname}"' in html
    assert 'data-queue="bull:plain"' not in html
    odd = html.split("data-odd-queues>")[1].split("</p>")[0]
    assert "bull:plain" in odd and "hash tag" in odd
    assert admin_client.get("/queues/bull/plain/").status_code == 404
    jobs = scrape()["bullpen_queue_jobs"]
    assert {s.labels["queue"] for s in jobs.samples} == {f"bull:{qname}"}


@pytest.mark.django_db
def test_fleet_reads_records_in_different_slots(
    dashboard_redis: str, r: RedisCluster, admin_client: Client
) -> None:
    """Heartbeats of workers and hosts whose keys sit on different primaries
    are listed (one GET each, never a cross-slot MGET); the GPU page shows
    them, leaving out the capacity of queues without a hash tag (records
    written elsewhere: such a queue's counts cannot be read here)."""
    ids = [f"h{i}:bull:q{i}:GPU-{i}" for i in range(6)]
    assert len({r.get_node_from_key(BullpenKeys().worker(i)).name for i in ids}) > 1
    for n, ident in enumerate(ids):
        record = {"id": ident, "host": f"h{n}", "state": "idle", "queue": f"q{n}"}
        beat(r, "worker", ident, {**record, "prefix": "bull", "slots": 1})
        beat(r, "host", f"h{n}", {"host": f"h{n}", "gpus": [], "queues": {}})
    # The GPU page draws 4 hosts' cards a page: every worker is on one of two.
    pages = [admin_client.get("/gpus/", {"page": n}) for n in (1, 2)]
    assert [p.status_code for p in pages] == [200, 200]
    body = "".join(p.content.decode() for p in pages)
    assert all(ident in body for ident in ids)
    fleet = Fleet(dashboard_redis)
    try:
        assert [w["id"] for w in fleet.list_workers()] == sorted(ids)
        assert [h["host"] for h in fleet.list_hosts()] == [f"h{n}" for n in range(6)]
    finally:
        fleet.close()


def _direct(r: RedisCluster, q: Queue, other: bool = False) -> redis.Redis:
    """A plain connection to the primary holding `q`'s slot (or to another)."""
    home = r.get_node_from_key(q.keys.meta)
    node = next(n for n in r.get_primaries() if (n.name != home.name) == other)
    return redis.Redis(node.host, node.port)


@pytest.mark.django_db
def test_workers_are_counted_on_the_primary_of_their_queue(
    dashboard_redis: str, r: RedisCluster, qname: str
) -> None:
    """getWorkers() and the overview's census ask every primary: a worker's
    blocking connection sits on its queue's node; a named connection of the
    same client on another node (the one it learnt the cluster from) does not
    count twice."""
    for name in on_each_primary(r):  # whichever node the client started from
        with Queue(name, dashboard_redis) as q:
            assert q.get_workers() == []
            with worker_thread(
                name, lambda job: None, dashboard_redis, worker_name="w"
            ):
                wait_until(lambda: q.get_workers_count() > 0, 10, what="the worker")
                assert q.get_workers_count() == 1
                [stats] = overview.overview([discovery.QueueRef("bull", name)])
                assert stats.workers == 1
            reads.reset()  # the census is cached for seconds
    with Queue(qname, dashboard_redis) as q:
        stray = _direct(r, q, other=True)
        home = _direct(r, q)
        try:
            name = connection_name("bull", qname, ":w:w2")
            stray.client_setname(name)
            home.client_setname(name)
            [listed] = q.get_workers()
            assert listed["rawname"] == name and listed["name"] == qname
            [stats] = overview.overview([discovery.QueueRef("bull", qname)])
            assert stats.workers == 1

            async def count() -> int:
                async with AsyncQueue(qname, dashboard_redis) as aq:
                    return await aq.get_workers_count()

            assert asyncio.run(count()) == 1
        finally:
            stray.close()
            home.close()


@pytest.fixture
def supervisor(dashboard_redis: str) -> Iterator[Fleet]:
    """A supervisor of host `ctest` on two simulated GPUs working queue
    `{gpu}` with one worker, on the cluster."""
    with simulated_supervisor(dashboard_redis, "ctest", "{gpu}") as fleet:
        yield fleet


@pytest.mark.django_db
def test_gpu_supervisor_on_a_cluster(
    supervisor: Fleet, dashboard_redis: str, admin_client: Client
) -> None:
    """Its heartbeats show on the GPU page and in /metrics, its worker
    completes jobs, and scaling to 2 starts a second worker."""
    wait_until(lambda: len(ready_workers(supervisor)) == 1, 20, what="the first worker")
    with Queue("{gpu}", dashboard_redis) as q:
        jobs = [q.add("demo", {"vram": "2GiB", "steps": 2}) for _ in range(3)]
        wait_until(
            lambda: q.get_counts("completed") == {"completed": 3},
            20,
            what="3 completed jobs",
        )
        for added in jobs:
            done = q.get_job(added.id)
            assert done is not None and done.returnvalue == {
                "steps": 2,
                "held_bytes": 2 * 2**30,
            }
        body = admin_client.get("/gpus/").content.decode()
        assert "SIM-ctest-0" in body and "SIM-ctest-1" in body
        assert 'data-scale="ctest/bull:{gpu}"' in body
        response = admin_client.post(
            "/gpus/actions/scale/",
            {"host": "ctest", "queue": "bull:{gpu}", "workers": "2"},
            HTTP_HX_REQUEST="true",
        )
        assert response.status_code == 200
        wait_until(
            lambda: len(ready_workers(supervisor)) == 2, 20, what="a second worker"
        )
        hosts = admin_client.get("/gpus/fragments/hosts/").content.decode()
        assert hosts.count('class="gpu-worker"') == 2
        families = scrape()
        assert value(families["bullpen_gpu_memory_total_bytes"], gpu="SIM-ctest-0") > 0
        row = _row(admin_client.get("/").content.decode(), "bull:{gpu}")
        assert "3 completed" in row


@pytest.mark.django_db
def test_an_unreachable_cluster_is_the_503_of_a_dead_redis(
    settings: Any, admin_client: Client
) -> None:
    """No node answering: pages answer 503 naming the failure, /metrics says
    bullpen_redis_up 0 (not a 500: the client is made on first use)."""
    settings.REDIS_URL = f"redis+cluster://127.0.0.1:{free_port()}"
    settings.BULLPEN_REDIS_CONNECT_TIMEOUT_S = 0.5
    reads.reset()
    try:
        response = admin_client.get("/")
        assert response.status_code == 503
        assert "cannot be connected" in response.content.decode()
        assert value(scrape()["bullpen_redis_up"]) == 0
    finally:
        reads.reset()
