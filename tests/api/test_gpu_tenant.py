"""The tenant of GPU-time accounting: a job enqueued through the API carries
its token's name (never its secret) in opts.tenant, which a real GpuWorker
counts it under; a client cannot set it itself."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from dashboard.api.models import ApiToken
from gpu_workers import gputime
from gpu_workers.keys import BullpenKeys
from queues import Queue
from tests.api.conftest import ApiClient
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers test handlers
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db


def test_api_jobs_count_under_their_token_name(
    make_token: Callable[..., tuple[ApiToken, str]],
    q: Queue,
    r: redis.Redis,
    api_redis: str,
) -> None:
    """Enqueued with token "acme-prod": opts.tenant is that name, the secret
    appears nowhere, and the hour bucket counts the attempt for acme-prod."""
    _, secret = make_token(name="acme-prod")
    api = ApiClient(secret)
    body: dict[str, Any] = {"name": "test.sleep", "data": {"s": 0.05}}
    response = api.post_json(f"/api/v1/queues/{q.name}/jobs", body)
    assert response.status_code == 201, response.content
    job_id = response.json()["id"]
    stored = q.get_job(job_id)
    assert stored is not None and stored.opts["tenant"] == "acme-prod"
    assert secret not in str(r.hgetall(f"bull:{q.name}:{job_id}"))
    worker = WorkerThread(make_spec(api_redis, q.name))
    try:
        wait_until(lambda: q.get_job_state(job_id).value == "completed")
    finally:
        worker.stop()
    hour = int(time.time() // 3600) * 3600
    stamp = gputime.bucket_stamp(gputime.HOUR, hour)
    key = BullpenKeys().gputime(gputime.HOUR, stamp, "tenant")
    tenants = gputime.parse_hash(r.hgetall(key))
    assert list(tenants) == ["acme-prod"] and tenants["acme-prod"].attempts == 1


def test_clients_cannot_choose_their_tenant(
    make_token: Callable[..., tuple[ApiToken, str]], qname: str
) -> None:
    """options.tenant is not an option the API takes."""
    _, secret = make_token(name="honest")
    body = {"name": "a", "options": {"tenant": "someone-else"}}
    response = ApiClient(secret).post_json(f"/api/v1/queues/{qname}/jobs", body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_option"
