"""A job's state and fields are read in one atomic step: a client polling a job
while a real worker finishes it never sees "completed" beside the fields of
before (no return value)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from queues import Queue
from tests.api.conftest import ApiClient
from tests.api.test_sse import parse
from tests.queues.test_cli import start_worker, stop_worker

JOBS = 150


@pytest.fixture
def poller(make_token: Callable[..., tuple[Any, str]]) -> ApiClient:
    """A client whose token's rate limit a tight polling loop never reaches
    (the default 600 a minute is, while the worker process starts)."""
    return ApiClient(make_token(rate=1_000_000)[1])


def _poll_until_final(api: ApiClient, qname: str, job_id: str) -> list[Any]:
    """Poll the job until it is completed; returns every body that said
    "completed" without a return value."""
    torn = []
    while True:
        response = api.get(f"/api/v1/queues/{qname}/jobs/{job_id}")
        assert response.status_code == 200, response.content
        body = response.json()
        if body["state"] == "completed":
            if body["returnvalue"] is None or body["timestamps"]["finished"] is None:
                torn.append(body)
            return torn


@pytest.mark.django_db
def test_polling_readers_never_see_completed_without_its_result(
    poller: ApiClient, q: Queue, qname: str, redis_url: str
) -> None:
    """150 jobs finished one by one by a worker process while the API is polled
    for each: every "completed" answer carries the return value."""
    ids = [q.add("j", {"seconds": 0.004}).id for _ in range(JOBS)]
    worker = start_worker(redis_url, qname, "slow")
    try:
        torn = [
            body for job_id in ids for body in _poll_until_final(poller, qname, job_id)
        ]
    finally:
        stop_worker(worker)
    assert torn == []
    assert q.get_counts("completed") == {"completed": JOBS}


# Committed data: each stream is closed mid-way, as by a client that goes
# away, and its end closes the database connection as in production, which
# a test transaction does not survive on PostgreSQL.
@pytest.mark.django_db(transaction=True)
def test_sse_state_frames_match_the_fields_beside_them(
    poller: ApiClient, q: Queue, qname: str, redis_url: str
) -> None:
    """Each SSE connection's first `state` frame, taken again and again while
    a worker finishes the jobs, carries a return value exactly when the state
    says completed."""
    ids = [q.add("j", {"seconds": 0.004}).id for _ in range(JOBS)]
    torn = []
    worker = start_worker(redis_url, qname, "slow")
    try:
        for job_id in ids:
            while True:
                response = poller.get(f"/api/v1/queues/{qname}/jobs/{job_id}/events")
                assert response.status_code == 200, response.content
                first = next(parse(response.streaming_content))["data"]
                response.close()
                done = first["state"] == "completed"
                if done != (first["returnvalue"] is not None):
                    torn.append(first)
                if done:
                    break
    finally:
        stop_worker(worker)
    assert torn == []
