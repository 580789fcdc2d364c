"""BULLPEN_REDACT on every dashboard path that shows what a job carries: job
lists (progress, failed reason), the job page (progress, result, failed
reason, stack trace, logs), triage, the GPU page's running jobs, and the live
socket's messages (progress, completed return values, failed reasons), live
and replayed. The API, SSE and webhooks: tests/api/test_redaction.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client

from dashboard.console.reads import fleet as fleet_reads
from dashboard.shared.redaction import REDACTED, redact_sensitive_keys
from queues import AsyncQueue, Queue
from queues.ops import now_ms
from tests.dashboard.helpers import (
    SIM_GPU,
    beat,
    job_url,
    make_active,
    queue_url,
    run_jobs,
)
from tests.dashboard.live_helpers import (
    next_message,
    receive_until,
    run,
    session_cookie,
    subscribed,
)

SECRET = "sk-SECRET-4242"
HOOK = "tests.dashboard.test_redaction.scrub"


def scrub(value: Any) -> Any:
    """A redaction hook: secret-looking keys, and the secret inside any text."""
    value = redact_sensitive_keys(value)
    if isinstance(value, str):
        return value.replace(SECRET, REDACTED)
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    return value


def secret_jobs(q: Queue, r: redis.Redis) -> tuple[str, str, str]:
    """(failed, completed, active) jobs whose every field holds the secret."""
    (failed,) = run_jobs(q, 1, "failed", value=f"auth refused for {SECRET}")
    r.hset(q.keys.job(failed), "stacktrace", json.dumps([f"Error: {SECRET}\n at x"]))
    job = q.get_job(failed)
    assert job is not None
    job.log(f"using key {SECRET}")
    job.update_progress({"percent": 100, "api_key": SECRET})
    (completed,) = run_jobs(q, 1, "completed", value={"token": SECRET, "ok": 1})
    active = make_active(q)
    active_job = q.get_job(active)
    assert active_job is not None
    active_job.update_progress({"percent": 40, "note": f"key {SECRET}"})
    return failed, completed, active


@pytest.mark.django_db
def test_pages_never_show_a_redacted_value(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """Lists, job pages and triage pass progress, results, reasons, stack
    traces and logs through the hook (the secret is in each of them)."""
    settings.BULLPEN_REDACT = HOOK
    q = Queue(qname, dashboard_redis)
    r = redis.Redis.from_url(dashboard_redis)
    failed, completed, active = secret_jobs(q, r)
    urls = [f"{queue_url(q)}?state={tab}" for tab in ("latest", "failed", "active")] + [
        job_url(q, failed),
        job_url(q, completed),
        job_url(q, active),
        f"/triage/bull/{qname}/",
    ]
    for url in urls:
        html = admin_client.get(url).content.decode()
        assert SECRET not in html, url
        assert REDACTED in html, url
    page = admin_client.get(job_url(q, failed)).content.decode()
    assert "auth refused for [redacted]" in page  # the rest of the text stays
    assert "using key [redacted]" in page


@pytest.mark.django_db
def test_gpu_page_and_worker_snapshots_are_redacted(
    dashboard_redis: str, admin_client: Client, settings: Any
) -> None:
    """Running jobs' progress on the GPU page, and in the worker records
    that live updates send."""
    settings.BULLPEN_REDACT = HOOK
    r = redis.Redis.from_url(dashboard_redis)
    host = {"host": "h1", "state": "running", "mode": "simulated", "gpus": [SIM_GPU]}
    beat(r, "host", "h1", {**host, "ts_ms": now_ms()})
    record = {
        "id": "w1",
        "host": "h1",
        "queue": "gpu",
        "prefix": "bull",
        "gpu": {"uuid": SIM_GPU["uuid"]},
        "state": "busy",
        "ts_ms": now_ms(),
        "running": [
            {"id": "1", "name": "x", "state": "running", "progress": {"t": SECRET}}
        ],
    }
    beat(r, "worker", "w1", record)
    html = admin_client.get("/gpus/").content.decode()
    assert 'data-worker="w1"' in html
    assert SECRET not in html and REDACTED in html
    shown = json.dumps(fleet_reads.shown_records([record]))
    assert SECRET not in shown and REDACTED in shown


@pytest.mark.django_db(transaction=True)
def test_live_messages_are_redacted(
    live: str, viewer: User, settings: Any, qname: str
) -> None:
    """Replayed and live: progress, completed return values and failed
    reasons reach the browser only through the hook."""
    settings.BULLPEN_REDACT = HOOK
    q = Queue(qname, live)
    r = redis.Redis.from_url(live)
    secret_jobs(q, r)
    cookie = session_cookie(viewer)
    key = f"bull:{qname}"

    async def test() -> None:
        comm = await subscribed(cookie, queues=[key], last_ids={key: "0-0"})
        got = []
        while (message := await next_message(comm))["type"] != "replayed":
            got.append(message)
        kinds = {m.get("event", m["type"]) for m in got}
        assert {"progress", "completed", "failed"} <= kinds
        assert SECRET not in json.dumps(got) and REDACTED in json.dumps(got)
        aq = AsyncQueue(qname, live)
        job = await aq.get_job(make_active(q))
        assert job is not None
        await job.update_progress({"percent": 7, "password": SECRET})
        live_progress = await receive_until(comm, lambda m: m["type"] == "progress")
        assert live_progress["progress"] == {"percent": 7, "password": REDACTED}
        await aq.close()

    run(test)
