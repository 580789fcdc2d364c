"""BULLPEN_REDACT on what the producer API, its Server-Sent Events and
webhooks send: job data, progress, return values and failed reasons go
through the same hook as the dashboard's pages (tests/dashboard/test_redaction.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dashboard.shared.redaction import REDACTED
from queues import Job
from tests.api.conftest import ApiClient
from tests.api.helpers import Receiver, WorkerThread, dispatching, fast_config
from tests.dashboard.test_redaction import HOOK, SECRET
from tests.helpers import wait_until


async def leaky(job: Job) -> dict[str, Any]:
    """Reports progress and returns (or fails with) the secret."""
    await job.update_progress({"percent": 50, "token": SECRET})
    if job.data.get("fail"):
        raise RuntimeError(f"key {SECRET} refused")
    return {"password": SECRET, "url": "s3://out.png"}


def until_state(stream: Iterator[bytes]) -> bytes:
    """The chunks of an event stream up to its first `state` message."""
    read = b""
    while b"event: state" not in read:
        read += next(stream)
    return read


@pytest.mark.django_db
def test_api_sse_and_webhooks_redact_job_content(
    api: ApiClient, settings: Any, qname: str, api_redis: str
) -> None:
    """The job status, its event stream (state and replayed events) and every
    webhook body show the secret only as redacted."""
    settings.BULLPEN_REDACT = HOOK
    settings.BULLPEN_WEBHOOK_ALLOW_PRIVATE = True
    receiver = Receiver()
    try:
        ids = []
        for data in ({"api_token": SECRET}, {"fail": True}):
            response = api.post_json(
                f"/api/v1/queues/{qname}/jobs",
                {"name": "x", "data": data, "options": {"webhook_url": receiver.url()}},
            )
            assert response.status_code == 201, response.content
            ids.append(response.json()["id"])
        # Followed from before the jobs run: their live events come next.
        streams = [
            iter(api.get(f"/api/v1/queues/{qname}/jobs/{i}/events").streaming_content)
            for i in ids
        ]
        firsts = [until_state(stream) for stream in streams]
        with dispatching(fast_config()):
            worker = WorkerThread(qname, leaky, api_redis)
            try:
                wait_until(
                    lambda: {"completed", "failed"} <= set(receiver.events()),
                    what="completed and failed webhooks",
                )
            finally:
                worker.stop()
        hooks = [r.body.decode() for r in receiver.requests]
    finally:
        receiver.close()
    assert {"progress", "completed", "failed"} <= set(receiver.events())
    assert all(SECRET not in body for body in hooks)
    assert REDACTED in "".join(hooks)
    for job_id in ids:
        status = api.get(f"/api/v1/queues/{qname}/jobs/{job_id}").content.decode()
        assert SECRET not in status and REDACTED in status
    for first, stream in zip(firsts, streams):
        text = b"".join([first, *stream]).decode()
        assert "event: progress" in text and "event: state" in text
        assert SECRET not in text and REDACTED in text
