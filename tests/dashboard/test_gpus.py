"""The GPU workers page: what it shows per host, GPU and worker, who may scale
(permission, CSRF, audit), the capacity view, and scaling a real supervisor
on simulated GPUs."""

from __future__ import annotations

import html
import json
import re

import pytest
import redis
from django.test import Client

from dashboard.console.models import AuditEntry
from gpu_workers import Fleet
from gpu_workers.clock import now_ms
from queues import Queue
from tests.dashboard.conftest import client_for, user_in
from tests.dashboard.helpers import (
    H200_GPU,
    HX,
    SIM_GPU,
    GiB,
    beat,
    make_active,
    run_jobs,
)

pytestmark = pytest.mark.django_db

LIMITS = {
    "bull:gpu": {
        "prefix": "bull",
        "queue": "gpu",
        "max_workers": 2,
        "max_slots": 8,
        "default_slots": 3,
    }
}


def fleet_on(r: redis.Redis, job_name: str = "txt2img") -> None:
    """Host h1: a simulated 24 GiB GPU with a busy worker, an NVML GPU with a
    failed worker; desired counts as a supervisor seeds them."""
    now = now_ms()
    sim, real = SIM_GPU, H200_GPU
    beat(
        r,
        "host",
        "h1",
        {
            "host": "h1",
            "state": "running",
            "mode": "simulated",
            "simulated": True,
            "gpus": [sim, real],
            "queues": LIMITS,
            "ts_ms": now - 500,
        },
    )
    beat(
        r,
        "worker",
        "h1:bull:gpu:SIM-h1-0",
        {
            "id": "h1:bull:gpu:SIM-h1-0",
            "host": "h1",
            "queue": "gpu",
            "prefix": "bull",
            "gpu": {**sim, "memory_used_bytes": 9 * GiB},
            "simulated": True,
            "slots": 3,
            "budget_bytes": 21 * GiB,
            "committed_bytes": 10 * GiB,
            "running": [
                {
                    "id": "7",
                    "name": job_name,
                    "declared_bytes": 10 * GiB,
                    "admitted": True,
                    "state": "running",
                    "progress": 37,
                }
            ],
            "counters": {"processed": 12, "failed": 1, "oom": 2},
            "restarts": 4,
            "state": "busy",
            "ts_ms": now - 65_000,
        },
        ttl_s=120,  # last seen 65 s ago, still live (its supervisor vouched)
        seen_ms=now - 65_000,
    )
    beat(
        r,
        "worker",
        "h1:bull:gpu:GPU-abc",
        {
            "id": "h1:bull:gpu:GPU-abc",
            "host": "h1",
            "queue": "gpu",
            "prefix": "bull",
            "gpu": {"uuid": "GPU-abc"},
            "slots": 0,
            "budget_bytes": 138 * GiB,
            "committed_bytes": 0,
            "running": [],
            "counters": {},
            "restarts": 6,
            "state": "failed",
            "reason": "crashed 6 times in 60 s",
            "ts_ms": now - 1_000,
        },
    )
    r.hset("bullpen:desired:h1", "bull:gpu", json.dumps({"workers": 2, "slots": 3}))
    r.hset("bullpen:gpu:SIM-h1-0:counters", "oom_total", 2)


def page(client: Client) -> str:
    response = client.get("/gpus/")
    assert response.status_code == 200
    return response.content.decode()


# --- who sees what --------------------------------------------------------------------
def test_anonymous_is_sent_to_login(dashboard_redis: str) -> None:
    """Every GPU view needs a login."""
    for url in ("/gpus/", "/gpus/fragments/hosts/", "/gpus/fragments/capacity/"):
        response = Client().get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]


def test_without_view_permission_is_forbidden(
    dashboard_redis: str, nobody_client: Client
) -> None:
    """Logged in without dashboard.view_queues: 403."""
    assert nobody_client.get("/gpus/").status_code == 403


def test_page_shows_each_gpu_and_worker(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """VRAM gauge (used, committed, budget, total), simulated marked, readings,
    worker state, heartbeat age, running jobs with live progress, OOMs and
    restarts; a viewer gets no scaling controls."""
    fleet_on(r)
    body = page(viewer_client)
    sim = body[body.index('data-gpu="SIM-h1-0"') : body.index('data-gpu="GPU-abc"')]
    real = body[body.index('data-gpu="GPU-abc"') :]
    assert "simulated" in sim and "simulated" not in real.split("</article>")[0]
    assert "9.0 GiB</span> used" in sim and "10.0 GiB</span> committed" in sim
    assert "21.0 GiB budget" in sim and "24.0 GiB total" in sim
    assert 'class="committed" data-bar-width="41.7"' in sim
    assert "87%" in real and "61 °C" in real and "413 W / 700 W" in real
    assert 'data-live-progress="bull:gpu:7"' in sim
    assert 'data-live-progress-text="bull:gpu:7">37%<' in sim
    assert re.search(r"busy</span>", sim) and "4 restarts" in sim and "2 OOM" in sim
    assert 'OOM errors</dt><dd class="st-failed">2<' in sim
    assert "failed</span>" in real and "crashed 6 times in 60 s" in real
    assert re.search(r"heartbeat 1 m 0[56] s ago", sim)
    assert 'name="workers"' not in body and "gpus/actions/scale" not in body
    live = json.loads(html.unescape(re.search(r'data-live="([^"]*)"', body).group(1)))
    assert live == {"queues": ["bull:gpu"], "gpus": True}


def test_summary_counts_name_their_units_in_the_singular_for_one(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """The summary says "2 GPUs on 1 host", "1 job running": each unit word
    agrees with its count (gpus.js keeps it so on live updates, from the same
    attributes)."""
    fleet_on(r)
    body = page(viewer_client)
    pairs = re.findall(
        r'data-summary="(\w+)">(\d+)</span> (?:OOM )?<span data-unit="(\w+)" '
        r'data-one="(\w+)" data-many="(\w+)">(\w+)</span>',
        body,
    )
    fields = {p[0] for p in pairs}
    assert fields == {"gpus", "hosts", "running_jobs", "workers", "oom_total"}
    for field, count, unit, one, many, shown in pairs:
        assert unit == field
        assert shown == (one if count == "1" else many), (field, count, shown)
    assert '">host</span>' in body and '">GPUs</span>' in body


def test_job_names_render_inert(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """A running job's name from the heartbeat is untrusted: escaped."""
    fleet_on(r, job_name='<script>alert(1)</script>"><img src=x onerror=alert(2)>')
    body = page(viewer_client)
    assert "<script>alert(1)" not in body and "<img src=x" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_fragments_render_alone(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """htmx re-fetches the hosts and capacity panels by themselves."""
    fleet_on(r)
    hosts = viewer_client.get("/gpus/fragments/hosts/").content.decode()
    assert hosts.startswith('<div id="gpu-hosts"') and "SIM-h1-0" in hosts
    assert "<html" not in hosts
    capacity = viewer_client.get("/gpus/fragments/capacity/").content.decode()
    assert capacity.startswith('<section id="gpu-capacity"')


def test_no_supervisor_says_how_to_start_one(
    dashboard_redis: str, viewer_client: Client
) -> None:
    """An empty registry explains itself instead of showing nothing."""
    assert "manage.py runworkers" in page(viewer_client)


def test_capacity_eta(
    dashboard_redis: str, r: redis.Redis, qname: str, viewer_client: Client
) -> None:
    """Backlog (waiting + prioritized) against live slots, with an ETA at the
    throughput of the last 5 minutes: 8 jobs at 2 a minute is 4 minutes."""
    fleet_on(r)
    q = Queue("gpu", dashboard_redis)
    run_jobs(q, 10, target="completed", value=1)
    q.add_bulk([{"name": "w", "data": {}} for _ in range(6)])
    q.add("p", {}, priority=2)
    q.add("p", {}, priority=3)
    body = viewer_client.get("/gpus/fragments/capacity/").content.decode()
    row = body[body.index('data-queue="bull:gpu"') :]
    row = row[: row.index("</tr>")]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert [c.strip() for c in cells[1:]] == [
        "6",
        "2",
        "0",
        "0",
        "1",
        "3",
        "2.0",
        "4 m 00 s",
    ]
    assert 'data-live-count="bull:gpu:waiting"' in row


def test_capacity_counts_jobs_retention_deleted_from_bullmq_metrics(
    dashboard_redis: str, r: redis.Redis, qname: str, viewer_client: Client
) -> None:
    """With removeOnComplete nothing stays in `completed`; the workers'
    per-minute metrics still give the throughput: 20 in 5 minutes is 4/min."""
    fleet_on(r)
    q = Queue("gpu", dashboard_redis)
    now = now_ms()
    r.hset(
        "bull:gpu:metrics:completed",
        mapping={"count": 40, "prevTS": now, "prevCount": 32},
    )
    r.rpush("bull:gpu:metrics:completed:data", 6, 6, 0, 0, 20)  # 8+6+6 in window
    q.add_bulk([{"name": "w", "data": {}} for _ in range(8)])
    body = viewer_client.get("/gpus/fragments/capacity/").content.decode()
    row = body[body.index('data-queue="bull:gpu"') :]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row[: row.index("</tr>")], re.S)
    assert [c.strip() for c in cells[-2:]] == ["4.0", "2 m 00 s"]


# --- scaling --------------------------------------------------------------------------
def test_only_scalers_see_the_controls(
    dashboard_redis: str, r: redis.Redis, operator_client: Client, scaler_client: Client
) -> None:
    """The scale form is shown to dashboard.scale_workers holders only."""
    fleet_on(r)
    assert 'name="workers"' not in page(operator_client)
    body = page(scaler_client)
    assert 'name="workers"' in body and 'name="csrfmiddlewaretoken"' in body
    assert 'max="2" value="2"' in body


def test_scaler_sets_desired_workers(
    dashboard_redis: str, r: redis.Redis, scaler_client: Client
) -> None:
    """A POST sets the host's desired counts for the queue and is audited."""
    fleet_on(r)
    response = scaler_client.post(
        "/gpus/actions/scale/",
        {"host": "h1", "queue": "bull:gpu", "workers": "1", "slots": "5"},
        **HX,
    )
    assert response.status_code == 200 and response["HX-Trigger"] == "bullpen:changed"
    assert Fleet(dashboard_redis).get_desired("h1") == {
        "bull:gpu": {"workers": 1, "slots": 5}
    }
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.outcome) == (
        "workers.scale",
        "bull:gpu",
        "ok",
    )
    assert "h1" in entry.detail and entry.username == "u-scaler"
    plain = scaler_client.post(
        "/gpus/actions/scale/", {"host": "h1", "queue": "bull:gpu", "workers": "2"}
    )
    assert plain.status_code == 303 and plain["Location"] == "/gpus/"


def test_operator_cannot_scale(
    dashboard_redis: str, r: redis.Redis, operator_client: Client
) -> None:
    """Operating queues is not scaling: 403, nothing changes, a denied entry."""
    fleet_on(r)
    response = operator_client.post(
        "/gpus/actions/scale/", {"host": "h1", "queue": "bull:gpu", "workers": "1"}
    )
    assert response.status_code == 403
    assert Fleet(dashboard_redis).get_desired("h1")["bull:gpu"]["workers"] == 2
    assert AuditEntry.objects.get().outcome == "denied"


def test_bad_requests_are_refused_and_audited(
    dashboard_redis: str, r: redis.Redis, scaler_client: Client
) -> None:
    """Over the host's limit, a host that is not live, junk: 400 with a reason."""
    fleet_on(r)
    for form, reason in (
        ({"host": "h1", "queue": "bull:gpu", "workers": "3"}, "at most 2"),
        ({"host": "h9", "queue": "bull:gpu", "workers": "1"}, "no live supervisor"),
        ({"host": "h1", "queue": "bull:gpu", "workers": "two"}, "whole number"),
        ({"host": "h1", "queue": "bull:gpu"}, "give a number"),
    ):
        response = scaler_client.post("/gpus/actions/scale/", form, **HX)
        assert response.status_code == 400, form
        assert reason in response.content.decode()
    assert Fleet(dashboard_redis).get_desired("h1")["bull:gpu"]["workers"] == 2
    assert list(AuditEntry.objects.values_list("outcome", flat=True)) == ["error"] * 4
    assert scaler_client.get("/gpus/actions/scale/").status_code == 405


def test_scaling_needs_csrf(dashboard_redis: str, r: redis.Redis) -> None:
    """A cross-site form post without the CSRF token is refused."""
    fleet_on(r)
    client = client_for(user_in("scaler"), enforce_csrf_checks=True)
    response = client.post(
        "/gpus/actions/scale/", {"host": "h1", "queue": "bull:gpu", "workers": "1"}
    )
    assert response.status_code == 403
    assert Fleet(dashboard_redis).get_desired("h1")["bull:gpu"]["workers"] == 2


def test_job_page_shows_a_running_jobs_declared_vram_and_gpu(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """Before a GPU job ends (when its peak is recorded), its page shows what
    the holding worker's heartbeat says: the declared need and the GPU."""
    q = Queue("gpu", dashboard_redis)
    ids = [make_active(q, "txt2img") for _ in range(7)]
    assert ids[-1] == "7"  # the job fleet_on's busy worker holds
    fleet_on(r)
    html = viewer_client.get("/queues/bull/gpu/jobs/7/").content.decode()
    gpu = html[html.index("<h3>GPU</h3>") :]
    gpu = gpu[: gpu.index("</dl>")]
    assert "10.0 GiB" in gpu and "SIM-h1-0" in gpu and "simulated" in gpu
    assert "recorded when the job ends" in gpu and "running" in gpu
    assert "waited for VRAM" not in gpu  # admitted at once (no times: unknown)
    other = viewer_client.get("/queues/bull/gpu/jobs/6/").content.decode()
    assert "No GPU worker's heartbeat lists this job" in other  # active


def test_vram_wait_runs_from_claim_to_start_or_to_now_while_waiting() -> None:
    """The job page's 'waited for VRAM': the record's claim-to-start time;
    for a job a live worker still holds waiting for VRAM, the time so far."""
    import time

    from dashboard.console.reads.job import vram_wait_ms

    assert vram_wait_ms({"claimed_ms": 1_000, "started_ms": 3_500}) == 2_500
    assert vram_wait_ms({"claimed_ms": 1_000, "outcome": "failed"}) is None
    assert vram_wait_ms({"started_ms": 5}) is None
    now = int(time.time() * 1000)
    live = {"claimed_ms": now - 3_000, "live": True, "outcome": "waiting-for-vram"}
    wait = vram_wait_ms(live)
    assert wait is not None and 3_000 <= wait < 4_000
