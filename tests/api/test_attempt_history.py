"""The job status's `attempt_history`: Bullpen's records of a job real
workers ran (errors redacted), BullMQ's fields for one no Bullpen worker
ran, valid against the OpenAPI document either way."""

from __future__ import annotations

import json
from typing import Any

import pytest

from queues import Job, Queue
from tests.api.conftest import ApiClient
from tests.api.test_waiting_reason import _status
from tests.dashboard.helpers import run_jobs
from tests.dashboard.test_redaction import HOOK, SECRET
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread

pytestmark = pytest.mark.django_db


def test_recorded_attempts_with_redacted_errors(
    api: ApiClient, q: Queue, qname: str, api_redis: str, settings: Any
) -> None:
    """Two failures then a success: three items, retried, retried,
    completed, each with its worker and times; errors through BULLPEN_REDACT."""
    settings.BULLPEN_REDACT = HOOK
    job = q.add("job", {}, attempts=3)
    seen: list[int] = []

    def flaky(j: Job[Any]) -> str:
        seen.append(1)
        if len(seen) < 3:
            raise RuntimeError(f"key {SECRET} refused ({len(seen)})")
        return "ok"

    with worker_thread(qname, flaky, api_redis, worker_name="api-w"):
        wait_until(lambda: q.get_job_state(job.id).value == "completed", 10)
    history = _status(api, qname, job.id)["attempt_history"]
    assert (history["source"], history["started"], history["unrecorded"]) == (
        "recorded",
        3,
        0,
    )
    items = history["items"]
    assert [i["outcome"] for i in items] == ["retried", "retried", "completed"]
    assert [i["attempt"] for i in items] == [1, 2, 3]
    assert {i["worker"] for i in items} == {"api-w"}
    assert all(i["duration_ms"] is not None for i in items)
    assert SECRET not in str(history) and "[redacted]" in items[0]["error"]
    assert items[2]["error"] is None


def test_attempts_known_from_bullmq(
    api: ApiClient, q: Queue, qname: str, api_redis: str
) -> None:
    """A job finished by another client (no record): one item per started
    attempt, from BullMQ's fields."""
    trace = json.dumps(["Error: first\n    at x.js:1"])
    [job_id] = run_jobs(q, 1, "failed", value="last", fields=["stacktrace", trace])
    history = _status(api, qname, job_id)["attempt_history"]
    assert (history["source"], history["started"], history["unrecorded"]) == (
        "bullmq",
        1,
        1,
    )
    (item,) = history["items"]
    assert (item["outcome"], item["error"]) == ("failed", "last")
    assert item["started_ms"] is not None and item["ended_ms"] is not None
