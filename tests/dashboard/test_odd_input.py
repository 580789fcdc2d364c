"""One odd queue or job written by another client never takes a shared page
down: every page answers 200, shows the rest and marks the odd one.

Each odd thing is written with raw Redis commands, as a Node producer or a
hand-rolled client would leave it."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.test import Client
from django.urls import reverse

from dashboard.api.models import ApiToken
from gpu_workers.heartbeat import queue_heartbeat
from gpu_workers.keys import BullpenKeys
from gpu_workers.series import SeriesSampler
from queues import Queue, ops
from queues.metrics import MINUTE_MS
from tests.dashboard.helpers import run_jobs

pytestmark = pytest.mark.django_db

NOW = 1_700_000_000_000
JOB = {"name": "odd", "data": "{}", "opts": "{}", "timestamp": NOW, "delay": 0}


def _raw_job(r: redis.Redis, base: bytes, job_id: bytes, **fields: Any) -> None:
    """A job hash and its place in `wait`, as Node's addStandardJob leaves them."""
    r.hset(base + job_id, mapping={**JOB, **fields})
    r.lpush(base + b"wait", job_id)


def _raw_queue(r: redis.Redis, name: bytes) -> None:
    """A queue with one waiting job, under a name Node allows."""
    r.hset(b"bull:" + name + b":meta", mapping={"opts.maxLenEvents": 10000})
    r.set(b"bull:" + name + b":id", 1)
    _raw_job(r, b"bull:" + name + b":", b"1")


def slash_queue(r: redis.Redis, base: bytes) -> list[str]:
    _raw_queue(r, b"slash/queue")
    return []


def binary_queue(r: redis.Redis, base: bytes) -> list[str]:
    _raw_queue(r, b"bin\xff\xfeq")
    return []


def text_timestamp(r: redis.Redis, base: bytes) -> list[str]:
    _raw_job(r, base, b"bad-ts", timestamp="yesterday", delay="soon")
    failed = {**JOB, "failedReason": "boom", "finishedOn": "later"}
    r.hset(base + b"bad-finish", mapping=failed)
    r.zadd(base + b"failed", {b"bad-finish": NOW})
    return ["bad-ts", "bad-finish"]


def newline_id(r: redis.Redis, base: bytes) -> list[str]:
    _raw_job(r, base, b"new\nline")
    return ["new\nline"]


def slash_parent(r: redis.Redis, base: bytes) -> list[str]:
    parent = json.dumps({"id": "p1", "queueKey": "bull:a/b"})
    _raw_job(r, base, b"child", parent=parent, parentKey="bull:a/b:p1")
    # And a parent whose child sits in a queue named with '/'.
    _raw_queue(r, b"slash/queue")
    r.hset(base + b"parent", mapping=JOB)
    r.zadd(base + b"waiting-children", {b"parent": NOW})
    r.sadd(base + b"parent:dependencies", b"bull:slash/queue:1")
    return ["child", "parent"]


ODD: dict[str, Callable[[redis.Redis, bytes], list[str]]] = {
    f.__name__: f
    for f in (slash_queue, binary_queue, text_timestamp, newline_id, slash_parent)
}


def _healthy(redis_url: str, qname: str) -> None:
    q = Queue(qname, redis_url)
    q.add("good", {"x": 1}, job_id="good-job")
    q.client.zadd(q.keys.failed, {"good-failed": NOW})
    q.client.hset(
        q.keys.job("good-failed"),
        mapping={**JOB, "failedReason": "good boom", "finishedOn": NOW},
    )
    q.close()


def _ok(client: Client, path: str, **params: Any) -> str:
    response = client.get(path, params)
    assert response.status_code == 200, (path, response.status_code)
    return response.content.decode()


def _job_page(client: Client, qname: str, job_id: str) -> str:
    return _ok(client, reverse("bullpen:job", args=["bull", qname, job_id]))


@pytest.mark.parametrize("odd", [*ODD, "all"])
def test_every_shared_page_survives_odd_queues_and_jobs(
    dashboard_redis: str, admin_client: Client, qname: str, odd: str
) -> None:
    """Overview, queue page, triage, search, job pages, /metrics and the API's
    queue list answer 200, show the healthy queue and its jobs, and mark the
    odd ones."""
    _healthy(dashboard_redis, qname)
    r = redis.Redis.from_url(dashboard_redis)
    base = f"bull:{qname}:".encode()
    odd_ids = [i for name, f in ODD.items() if odd in (name, "all") for i in f(r, base)]
    r.close()

    overview = _ok(admin_client, "/")
    assert f'data-queue="bull:{qname}"' in overview
    if odd in ("slash_queue", "slash_parent", "all"):
        assert "bull:slash/queue" in overview.split("data-odd-queues")[1]
    if odd in ("binary_queue", "all"):
        assert "bull:bin\\xff\\xfeq" in overview.split("data-odd-queues")[1]
    page = _ok(admin_client, reverse("bullpen:queue", args=["bull", qname]))
    assert "good-job" in page
    for job_id in ("bad-ts", "new\nline"):
        if job_id in odd_ids:
            row = page.split(f'data-job="bull:{qname}:{job_id}"')[1].split("</tr>")[0]
            assert 'class="badge odd"' in row
    _ok(admin_client, reverse("bullpen:queue", args=["bull", qname]), state="failed")
    _ok(admin_client, "/triage/")
    triage = _ok(admin_client, reverse("bullpen:triage", args=["bull", qname]))
    assert "good boom" in triage
    _ok(admin_client, "/search/", queue=f"bull:{qname}", state="waiting", name="odd")
    _ok(admin_client, "/search/", state="waiting", name="good")
    assert admin_client.get("/search/", {"job_id": "good-job"}).status_code == 302
    for job_id in ["good-job", *odd_ids]:
        _job_page(admin_client, qname, job_id)
    if "bad-ts" in odd_ids:
        detail = _job_page(admin_client, qname, "bad-ts")
        assert "timestamp &#x27;yesterday&#x27; is not a number" in detail
    if "child" in odd_ids:
        detail = _job_page(admin_client, qname, "child")
        assert '<code class="odd" title="its name holds' in detail
        assert "bull:a/b:p1</code>" in detail
    if "parent" in odd_ids:
        detail = _job_page(admin_client, qname, "parent")
        assert '<code class="mono odd"' in detail
        assert "bull:slash/queue:1</code>" in detail
    assert qname in _ok(Client(), "/metrics", REMOTE_ADDR="127.0.0.1")
    _, token = ApiToken.issue("t", "*", True, True, None)
    listed = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/v1/queues")
    assert listed.status_code == 200, listed.content
    assert qname in [row["queue"] for row in listed.json()["queues"]]


@pytest.mark.parametrize("job_id", ["wait", "meta", "events", "1:logs"])
def test_job_ids_naming_queue_keys_are_no_job(
    dashboard_redis: str, admin_client: Client, qname: str, job_id: str
) -> None:
    """The job page of an id that names one of the queue's keys is a 404, not
    a 500 from WRONGTYPE."""
    with Queue(qname, dashboard_redis) as q:
        q.add("a", {}).log("line")
        q.client.xadd(q.keys.events, {"event": "x"})
        response = admin_client.get(
            reverse("bullpen:job", args=["bull", qname, job_id])
        )
        assert response.status_code == 404


def test_a_parent_with_odd_child_keys_shows_its_real_children(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Dependencies another client wrote that are no job keys (a queue's own
    list, text without colons, an empty queue name) are skipped: the parent's
    page shows its real child."""
    r = redis.Redis.from_url(dashboard_redis)
    base = f"bull:{qname}:".encode()
    r.hset(base + b"meta", mapping={"opts.maxLenEvents": 10000})  # a known queue
    _raw_job(r, base, b"kid")
    r.hset(base + b"parent", mapping=JOB)
    r.zadd(base + b"waiting-children", {b"parent": NOW})
    r.sadd(base + b"parent:dependencies", base + b"kid", base + b"wait")
    r.sadd(base + b"parent:dependencies", b"garbage", b"bull::x")
    r.close()
    page = _job_page(admin_client, qname, "parent")
    assert f"bull:{qname}:kid</a>" in page


def test_workers_page_survives_odd_names_and_heartbeats(
    dashboard_redis: str, admin_client: Client
) -> None:
    """A worker connection whose name's queue is not UTF-8 once decoded (Redis
    refuses such bytes in the name itself, not in its base64) and a GPU
    heartbeat without prefix or queue are listed, escaped and unlinked: the
    workers page and its fragment answer 200."""
    odd = redis.Redis.from_url(dashboard_redis)
    odd.client_setname(b"bull:" + base64.b64encode(b"q\xff\xfe") + b":w:w2")
    record = {"id": "h-odd:gpu-x", "host": "h-odd", "pid": 7, "slots": 2}
    record |= {"gpu": {"index": 0}, "state": "idle", "running": []}
    with odd.pipeline() as pipe:
        queue_heartbeat(pipe, BullpenKeys(), "worker", record["id"], record, 60)
        pipe.execute()
    try:
        page = _ok(admin_client, reverse("bullpen:workers"))
        fragment = _ok(admin_client, reverse("bullpen:workers-list"))
        _ok(admin_client, reverse("bullpen:gpus"))
    finally:
        odd.close()
    for body in (page, fragment):
        assert (
            'bull:q\\xff\\xfe</span> <span class="small muted">(its name is not UTF-8)'
            in body
        )
        gpu = body.split('data-kind="Bullpen GPU worker"')[1].split("</tr>")[0]
        assert ">h-odd<" in gpu and 'data-field="pid">7<' in gpu


def test_a_failed_member_naming_a_queue_key_costs_no_scrape(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Members of `failed` that name no job hash (`id`, the queue's counter,
    and `1:logs`, a job's log list) and an `id` next in `wait`, which
    another client wrote, read as missing jobs: both queues' series, the
    overall series, /metrics (every family, Redis up) and a sampler's tick
    over both queues go on."""
    good = Queue(qname, dashboard_redis)
    run_jobs(good, 2, target="failed")
    odd = Queue(qname + "-odd", dashboard_redis)
    run_jobs(odd, 1, target="completed", value=1)
    odd.add("logged", {}).log("line")
    now = ops.now_ms()
    odd.client.zadd(odd.keys.failed, {"id": now, "1:logs": now})
    odd.client.rpush(odd.keys.wait, "id")  # the next job to wait, as it reads
    for name in (qname, odd.name):
        url = reverse("bullpen:queue-series", args=["bull", name])
        assert admin_client.get(url).status_code == 200, name
    overall = admin_client.get(reverse("bullpen:series-overall"))
    assert overall.status_code == 200
    assert sum(v or 0 for v in overall.json()["failed"][-2:]) >= 2
    text = _ok(Client(), "/metrics", REMOTE_ADDR="127.0.0.1")
    assert "bullpen_redis_up 1.0" in text
    for name in (qname, odd.name):
        assert f'bullpen_queue_jobs{{queue="bull:{name}",state="failed"}}' in text
    assert "bullpen_job_run_duration_seconds" in text
    sampler = SeriesSampler(good.client)
    refs = [("bull", qname), ("bull", odd.name)]
    assert sampler.tick(refs, gpus=False, now_ms=now + MINUTE_MS) == 2
    good.close()
    odd.close()
