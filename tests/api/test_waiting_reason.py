"""The job status's `waiting_reason`: a stable code and its numbers for a
job that waits, null for one that does not, valid against the OpenAPI
document, and its last error redacted like every other job text."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import redis

from queues import Job, Queue, ops
from tests.api.conftest import ApiClient
from tests.dashboard.helpers import run_jobs
from tests.dashboard.test_redaction import HOOK, SECRET
from tests.gpu_workers.waiting_helpers import connected_worker, push_ids
from tests.helpers import wait_until
from tests.queues.transitions.helpers import move_to_active
from tests.queues.worker.helpers import start_worker_thread

pytestmark = pytest.mark.django_db


def _status(api: ApiClient, qname: str, job_id: str) -> dict[str, Any]:
    """The job's status, checked against the Job schema of /openapi.json."""
    body: dict[str, Any] = api.get(f"/api/v1/queues/{qname}/jobs/{job_id}").json()
    doc = api.get("/api/v1/openapi.json").json()
    schema = {"$ref": "#/components/schemas/Job", "components": doc["components"]}
    jsonschema.Draft202012Validator(schema).validate(body)
    return body


def test_paused_concurrency_and_null(
    api: ApiClient, q: Queue, qname: str, api_redis: str
) -> None:
    """A paused queue's job says `queue_paused` with the others in `also`;
    a resumed queue at its concurrency says `global_concurrency` 1 of 1; a
    job that runs has none."""
    running = q.add("job", {})
    job = q.add("job", {})
    q.set_global_concurrency(1)
    q.pause()
    with connected_worker(api_redis, q):
        reason = _status(api, qname, job.id)["waiting_reason"]
        assert reason["code"] == "queue_paused"
        assert [a["code"] for a in reason["also"]] == ["queued"]
        assert reason["also"][0]["ahead"] == 1  # the first job is before it
        q.resume()
        move_to_active(q, now=running.timestamp + 1)
        reason = _status(api, qname, job.id)["waiting_reason"]
    assert reason["code"] == "global_concurrency"
    assert (reason["active"], reason["concurrency"]) == (1, 1)
    assert _status(api, qname, running.id)["waiting_reason"] is None


def test_retry_backoff_with_a_redacted_last_error(
    api: ApiClient, q: Queue, qname: str, api_redis: str, settings: Any
) -> None:
    """A job a real worker failed once waits out its backoff: attempt 2 of
    2, when, and the last error passed through BULLPEN_REDACT."""
    settings.BULLPEN_REDACT = HOOK
    job = q.add("job", {}, attempts=2, backoff={"type": "fixed", "delay": 60_000})

    def fail(job: Job[Any]) -> None:
        raise RuntimeError(f"key {SECRET} refused")

    worker = start_worker_thread(qname, fail, api_redis)
    try:
        wait_until(lambda: q.get_job_state(job.id).value == "delayed", timeout=10)
    finally:
        worker.stop()
    before = ops.now_ms()
    body = _status(api, qname, job.id)
    after = ops.now_ms()
    reason = body["waiting_reason"]
    assert reason["code"] == "retry_backoff"
    assert (reason["attempt"], reason["attempts"]) == (2, 2)
    assert 50_000 < reason["in_ms"] <= 60_000
    assert before <= reason["until_ms"] - reason["in_ms"] <= after
    assert SECRET not in str(body) and "[redacted]" in reason["last_error"]
    assert "no_worker" in [a["code"] for a in reason["also"]]


def _declared(reason: dict[str, Any], doc: dict[str, Any]) -> None:
    """Every number of `reason` (and of its `also`) is one the OpenAPI
    document's WaitingReason describes."""
    schema = doc["components"]["schemas"]["WaitingReason"]
    known = set(schema["properties"])
    assert set(reason) <= known, set(reason) - known
    also = set(schema["properties"]["also"]["items"]["properties"])
    for other in reason["also"]:
        assert set(other) <= also, set(other) - also


def test_a_long_line_exact_at_the_back_and_a_range_in_the_middle(
    api: ApiClient, q: Queue, qname: str, api_redis: str, r: redis.Redis
) -> None:
    """On a line of 60,001 jobs the one just added has exactly 60,000 ahead
    and an ETA; one in the middle has `ahead` null, the range [10,000,
    50,000] and an ETA range; both fields described in /openapi.json."""
    run_jobs(q, 10, target="completed", value=1)  # 2 jobs/min
    push_ids(r, q, 30_000, tag="a")
    middle = q.add("job", {})
    push_ids(r, q, 30_000, tag="b")
    newest = q.add("job", {})
    doc = api.get("/api/v1/openapi.json").json()
    with connected_worker(api_redis, q):
        back = _status(api, qname, newest.id)["waiting_reason"]
        mid = _status(api, qname, middle.id)["waiting_reason"]
    assert back["code"] == "queued" and back["ahead"] == 60_001
    assert back["eta_ms"] == 60_002 * 30_000
    assert mid["code"] == "queued" and mid["ahead"] is None
    assert (mid["ahead_at_least"], mid["ahead_at_most"]) == (10_000, 50_001)
    assert mid["eta_at_least_ms"] == 10_001 * 30_000
    assert mid["eta_at_most_ms"] == 50_002 * 30_000
    assert mid["message"].startswith("Between 10,000 and 50,001 jobs ahead of it")
    for reason in (back, mid):
        _declared(reason, doc)
