"""Job status, cancel/remove, queue counts and the delivery log endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
from django.template.loader import render_to_string

from dashboard.api import store
from dashboard.api.webhooks import deliveries
from queues import FlowProducer, Job, Queue
from tests.api.conftest import ApiClient
from tests.api.helpers import WorkerThread
from tests.api.test_validation import assert_error
from tests.helpers import wait_until


async def finish(job: Job) -> Any:
    await job.update_progress({"step": 3, "of": 3})
    if job.data.get("fail"):
        raise RuntimeError("bad prompt")
    return {"url": "s3://x.png"}


@pytest.mark.django_db
def test_status_of_waiting_completed_and_failed_jobs(
    api: ApiClient, q: Queue, qname: str, api_redis: str
) -> None:
    """State, data, progress, return value, failed reason, attempts and times."""
    waiting = api.post_json(
        f"/api/v1/queues/{qname}/jobs", {"name": "gen", "data": {"p": 1}}
    ).json()["id"]
    body = api.get(f"/api/v1/queues/{qname}/jobs/{waiting}").json()
    assert body["state"] == "waiting" and body["data"] == {"p": 1}
    assert body["attempts_made"] == 0 and body["attempts"] == 1
    assert body["timestamps"]["created"] > 0 and body["timestamps"]["finished"] is None
    failing = api.post_json(
        f"/api/v1/queues/{qname}/jobs",
        {"name": "gen", "data": {"fail": True}, "options": {"attempts": 2}},
    ).json()["id"]
    worker = WorkerThread(qname, finish, api_redis)
    try:
        wait_until(
            lambda: q.get_counts()["completed"] == 1 and q.get_counts()["failed"] == 1,
            what="both jobs finished",
        )
    finally:
        worker.stop()
    done = api.get(f"/api/v1/queues/{qname}/jobs/{waiting}").json()
    assert done["state"] == "completed" and done["returnvalue"] == {"url": "s3://x.png"}
    assert done["progress"] == {"step": 3, "of": 3}
    assert done["timestamps"]["processed"] <= done["timestamps"]["finished"]
    failed = api.get(f"/api/v1/queues/{qname}/jobs/{failing}").json()
    assert failed["state"] == "failed" and failed["failed_reason"] == "bad prompt"
    assert failed["attempts_made"] == 2 and failed["attempts"] == 2


@pytest.mark.django_db
def test_delete_removes_a_job_that_is_not_running(
    api: ApiClient, q: Queue, qname: str
) -> None:
    """DELETE of a waiting (or delayed) job removes it: 200, then 404."""
    for options in ({}, {"delay": 60_000}):
        job_id = api.post_json(
            f"/api/v1/queues/{qname}/jobs", {"name": "a", "options": options}
        ).json()["id"]
        response = api.delete(f"/api/v1/queues/{qname}/jobs/{job_id}")
        assert response.status_code == 200
        assert response.json()["result"] == "removed"
        assert q.get_job(job_id) is None
        assert_error(
            api.delete(f"/api/v1/queues/{qname}/jobs/{job_id}"), 404, "job_not_found"
        )


@pytest.mark.django_db
def test_delete_of_a_running_job_requests_a_cancel(
    api: ApiClient, q: Queue, qname: str, api_redis: str, r: redis.Redis
) -> None:
    """DELETE of an active job answers 202 and sets the cancel flag that GPU
    workers honour (gpu_workers.Fleet.request_cancel)."""
    release = {"go": False}

    async def hold(job: Job) -> int:
        while not release["go"]:
            await asyncio.sleep(0.02)
        return 1

    job_id = api.post_json(f"/api/v1/queues/{qname}/jobs", {"name": "a"}).json()["id"]
    worker = WorkerThread(qname, hold, api_redis)
    try:
        wait_until(lambda: q.get_job_state(job_id).value == "active", what="active")
        response = api.delete(f"/api/v1/queues/{qname}/jobs/{job_id}")
        assert response.status_code == 202
        assert response.json() == {
            "id": job_id,
            "result": "cancel_requested",
            "previous_state": "active",
        }
        assert r.exists(f"bullpen:cancel:bull:{qname}:{job_id}")
    finally:
        release["go"] = True
        worker.stop()


@pytest.mark.django_db
def test_delete_of_a_parent_with_a_running_child_is_refused(
    api: ApiClient, q: Queue, qname: str, api_redis: str, r: redis.Redis
) -> None:
    """DELETE of a flow parent removes its children too; while one of them is
    running the API answers 409 and removes nothing, and no cancel is set for
    the parent (which is not running)."""
    release = {"go": False}

    async def hold(job: Job) -> int:
        while not release["go"]:
            await asyncio.sleep(0.02)
        return 1

    with FlowProducer(api_redis) as producer:
        producer.add(
            {
                "name": "parent",
                "queue_name": qname + "p",
                "opts": {"job_id": "P"},
                "children": [
                    {"name": "child", "queue_name": qname, "opts": {"job_id": "c"}}
                ],
            }
        )
    worker = WorkerThread(qname, hold, api_redis)
    try:
        wait_until(lambda: q.get_job_state("c").value == "active", what="active")
        response = api.delete(f"/api/v1/queues/{qname}p/jobs/P")
        assert_error(response, 409, "job_has_running_child")
        assert not r.exists(f"bullpen:cancel:bull:{qname}p:P")
        assert r.exists(f"bull:{qname}p:P", f"bull:{qname}:c") == 2
    finally:
        release["go"] = True
        worker.stop()
    response = api.delete(f"/api/v1/queues/{qname}p/jobs/P")
    assert response.json()["result"] == "removed"
    assert not r.exists(f"bull:{qname}p:P", f"bull:{qname}:c")


@pytest.mark.django_db
def test_queue_counts(api: ApiClient, q: Queue, qname: str) -> None:
    """Counts per state and the paused flag, as the queue core reports them."""
    q.add_bulk([{"name": "a", "data": {}} for _ in range(3)])
    q.add("later", {}, delay=60_000)
    q.add("urgent", {}, priority=1)
    q.pause()
    body = api.get(f"/api/v1/queues/{qname}").json()
    assert body["queue"] == qname and body["paused"] is True
    assert body["counts"] == q.get_counts()
    assert body["counts"]["waiting"] == 3 and body["counts"]["delayed"] == 1
    empty = api.get("/api/v1/queues/never-used").json()
    assert set(empty["counts"].values()) == {0}


@pytest.mark.django_db
def test_deliveries_endpoint_and_fragment(api: ApiClient, q: Queue, qname: str) -> None:
    """The delivery log reads newest first; an unknown job with no log is a
    404; the job page's fragment renders the attempts (escaped)."""
    job = q.add("a", {})
    assert api.get(f"/api/v1/queues/{qname}/jobs/{job.id}/deliveries").json() == {
        "job_id": job.id,
        "deliveries": [],
    }
    assert_error(
        api.get(f"/api/v1/queues/{qname}/jobs/zzz/deliveries"), 404, "job_not_found"
    )
    for attempt, outcome, code in ((1, "retrying", 500), (2, "delivered", 200)):
        deliveries.record(
            store.client(),
            store.keys(),
            f"bull:{qname}",
            job.id,
            {
                "delivery_id": "wh-1",
                "event": "completed",
                "event_id": "1-0",
                "target": "job",
                "url": "https://example.com/<hook>",
                "attempt": attempt,
                "at_ms": 1_700_000_000_000 + attempt,
                "duration_ms": 12,
                "status_code": code,
                "outcome": outcome,
                "error": "HTTP 500: <b>oops</b>" if code == 500 else None,
            },
        )
    rows = api.get(f"/api/v1/queues/{qname}/jobs/{job.id}/deliveries").json()[
        "deliveries"
    ]
    assert [(d["attempt"], d["outcome"]) for d in rows] == [
        (2, "delivered"),
        (1, "retrying"),
    ]
    html = render_to_string(
        "api/_deliveries.html",
        {"deliveries": deliveries.for_dashboard("bull", qname, job.id)},
    )
    assert "delivered" in html and "retrying" in html
    assert "&lt;b&gt;oops&lt;/b&gt;" in html and "<b>oops" not in html
    assert "https://example.com/&lt;hook&gt;" in html
    assert "No webhook deliveries" in render_to_string(
        "api/_deliveries.html", {"deliveries": []}
    )
