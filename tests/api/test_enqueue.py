"""POST /api/v1/queues/{queue}/jobs: options, job ids, Idempotency-Key,
per-queue JSON Schemas and job webhooks registered before the add."""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
import pytest
import redis

from dashboard.api import store
from dashboard.api.models import QueueSchema
from queues import Queue
from tests.api.conftest import ApiClient


def post(api: ApiClient, queue: str, body: Any, **headers: Any) -> Any:
    return api.post_json(f"/api/v1/queues/{queue}/jobs", body, **headers)


@pytest.mark.django_db
def test_enqueue_answers_201_with_id_and_urls(
    api: ApiClient, q: Queue, qname: str
) -> None:
    """201, the job id, a status URL (also in Location), an events URL and a
    ticket; the job is in the queue with its data."""
    response = post(api, qname, {"name": "txt2img", "data": {"prompt": "a cat"}})
    assert response.status_code == 201
    body = response.json()
    assert (
        body["status_url"]
        == f"http://testserver/api/v1/queues/{qname}/jobs/{body['id']}"
    )
    assert response["Location"] == body["status_url"]
    assert body["events_url"] == body["status_url"] + "/events"
    assert body["name"] == "txt2img" and body["queue"] == qname and body["ticket"]
    job = q.get_job(body["id"])
    assert job.name == "txt2img" and job.data == {"prompt": "a cat"}
    assert response["RateLimit-Limit"] == "600"


@pytest.mark.django_db
def test_options_reach_the_job(api: ApiClient, q: Queue, qname: str) -> None:
    """priority, delay, attempts, backoff, lifo, retention and job_id are the
    job's BullMQ options; data defaults to {}."""
    response = post(
        api,
        qname,
        {
            "name": "render",
            "options": {
                "job_id": "order-17",
                "priority": 5,
                "delay": 60_000,
                "attempts": 4,
                "backoff": {"type": "exponential", "delay": 1000},
                "lifo": True,
                "remove_on_complete": {"age": 3600, "count": 10},
                "remove_on_fail": 100,
            },
        },
    )
    assert response.status_code == 201, response.content
    assert response.json()["id"] == "order-17"
    job = q.get_job("order-17")
    assert job.data == {}
    assert job.opts["priority"] == 5 and job.opts["delay"] == 60_000
    assert job.opts["attempts"] == 4
    assert job.opts["backoff"] == {"type": "exponential", "delay": 1000}
    assert job.opts["lifo"] is True
    assert job.opts["removeOnComplete"] == {"age": 3600, "count": 10}
    assert job.opts["removeOnFail"] == 100
    assert q.get_job_state("order-17").value == "delayed"
    bare = post(api, qname, {"name": "render", "options": {"backoff": 250}})
    assert q.get_job(bare.json()["id"]).opts["backoff"] == {
        "type": "fixed",
        "delay": 250,
    }


@pytest.mark.django_db
def test_taken_job_id_is_409(api: ApiClient, q: Queue, qname: str) -> None:
    """A job_id that is already a job of the queue is refused, not ignored."""
    assert (
        post(api, qname, {"name": "a", "options": {"job_id": "x1"}}).status_code == 201
    )
    response = post(api, qname, {"name": "b", "options": {"job_id": "x1"}})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "job_id_taken"
    assert q.get_job("x1").name == "a"


@pytest.mark.django_db
def test_idempotency_key_enqueues_once(api: ApiClient, q: Queue, qname: str) -> None:
    """The same key and body twice: one job; the replay is a 200 with the same
    id and Idempotent-Replayed: true."""
    body = {"name": "render", "data": {"n": 1}}
    first = post(api, qname, body, HTTP_IDEMPOTENCY_KEY="req-1")
    second = post(api, qname, body, HTTP_IDEMPOTENCY_KEY="req-1")
    assert first.status_code == 201 and second.status_code == 200
    assert second["Idempotent-Replayed"] == "true"
    assert first.json()["id"] == second.json()["id"]
    assert q.get_counts()["waiting"] == 1
    other = post(api, qname, body, HTTP_IDEMPOTENCY_KEY="req-2")
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


@pytest.mark.django_db
def test_idempotency_key_with_another_body_is_422(
    api: ApiClient, q: Queue, qname: str
) -> None:
    """Reusing a key for a different request is refused."""
    post(api, qname, {"name": "render", "data": {"n": 1}}, HTTP_IDEMPOTENCY_KEY="k")
    response = post(
        api, qname, {"name": "render", "data": {"n": 2}}, HTTP_IDEMPOTENCY_KEY="k"
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "idempotency_key_reused"
    assert q.get_counts()["waiting"] == 1


@pytest.mark.django_db
def test_idempotency_keys_are_per_token(make_token: Any, q: Queue, qname: str) -> None:
    """Two tokens using the same key make two jobs (keys are not shared)."""
    a, b = ApiClient(make_token()[1]), ApiClient(make_token()[1])
    body = {"name": "render"}
    ids = {
        post(c, qname, body, HTTP_IDEMPOTENCY_KEY="same").json()["id"] for c in (a, b)
    }
    assert len(ids) == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_add_one_job(make_token: Any, q: Queue, qname: str) -> None:
    """Eight simultaneous POSTs with one key add exactly one job; each answer
    is that job (201/200) or "still in progress" (409)."""
    token = make_token()[1]
    results: list[tuple[int, Any]] = []
    barrier = threading.Barrier(8)

    def send() -> None:
        client = ApiClient(token)
        barrier.wait()
        response = post(client, qname, {"name": "render"}, HTTP_IDEMPOTENCY_KEY="burst")
        results.append((response.status_code, response.json()))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 8
    assert q.get_counts()["waiting"] == 1
    ids = {body["id"] for status, body in results if status in (200, 201)}
    assert len(ids) == 1
    assert sum(status == 201 for status, _ in results) == 1
    assert {status for status, _ in results} <= {200, 201, 409}


@pytest.mark.django_db
def test_idempotent_request_that_died_is_taken_over(
    api: ApiClient, q: Queue, qname: str, r: redis.Redis
) -> None:
    """A claim left pending (its request died before adding) answers 409 while
    fresh and is taken over once stale: the job is added under the claimed id."""
    from dashboard.api import idempotency
    from dashboard.api.models import ApiToken

    body = {"name": "render"}
    token = ApiToken.objects.get()
    key = store.keys().idempotency(f"t{token.pk}", f"bull:{qname}", "died")
    fp = idempotency.fingerprint(qname, body)
    record = {"job_id": "job-claimed", "fp": fp, "state": "pending", "ts": time.time()}
    r.set(key, orjson.dumps(record), ex=60)
    busy = post(api, qname, body, HTTP_IDEMPOTENCY_KEY="died")
    assert busy.status_code == 409
    assert busy.json()["error"]["code"] == "idempotency_in_progress"
    assert busy["Retry-After"] == "1"
    r.set(key, orjson.dumps({**record, "ts": time.time() - 60}), ex=60)
    taken = post(api, qname, body, HTTP_IDEMPOTENCY_KEY="died")
    assert taken.status_code == 201 and taken.json()["id"] == "job-claimed"
    assert q.get_job("job-claimed") is not None
    replay = post(api, qname, body, HTTP_IDEMPOTENCY_KEY="died")
    assert replay.status_code == 200 and replay.json()["id"] == "job-claimed"


@pytest.mark.django_db
def test_queue_json_schema_is_enforced(api: ApiClient, q: Queue, qname: str) -> None:
    """With a JSON Schema set for the queue, data that fails it is a 422 listing
    each violation; data that passes is enqueued."""
    QueueSchema.objects.create(
        queue=qname,
        json_schema={
            "type": "object",
            "required": ["prompt"],
            "properties": {
                "prompt": {"type": "string", "maxLength": 10},
                "steps": {"type": "integer", "minimum": 1},
            },
        },
    )
    bad = post(api, qname, {"name": "t", "data": {"prompt": "x" * 11, "steps": 0}})
    assert bad.status_code == 422
    error = bad.json()["error"]
    assert error["code"] == "schema_validation_failed"
    assert [e["path"] for e in error["details"]["errors"]] == ["prompt", "steps"]
    assert post(api, qname, {"name": "t", "data": {"prompt": "ok"}}).status_code == 201
    assert q.get_counts()["waiting"] == 1


@pytest.mark.django_db
def test_webhook_is_recorded_and_followed_before_the_job_is_added(
    api: ApiClient, settings: Any, q: Queue, qname: str, r: redis.Redis
) -> None:
    """A webhook URL gets the job a known id, its record (URL, events, the
    token's secret) and the dispatcher's consumer group on the queue's events
    stream, created at the stream's end before the job's `added` event."""
    settings.BULLPEN_WEBHOOK_ALLOW_PRIVATE = True
    response = post(
        api,
        qname,
        {
            "name": "t",
            "options": {
                "webhook_url": "http://127.0.0.1:9/hook",
                "webhook_events": ["completed"],
            },
        },
    )
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("job-")
    assert body["webhook"] == {
        "url": "http://127.0.0.1:9/hook",
        "events": ["completed"],
    }
    record = orjson.loads(r.get(f"bullpen:wh:job:bull:{qname}:{body['id']}"))
    assert record["url"] == "http://127.0.0.1:9/hook" and record["events"] == [
        "completed"
    ]
    assert record["secret"].startswith("whsec_")
    assert f"bull:{qname}" in r.smembers("bullpen:wh:queues")
    group = r.xinfo_groups(f"bull:{qname}:events")[0]
    added = r.xrange(f"bull:{qname}:events")[0]
    assert group["name"] == "bullpen-webhooks" and group["pending"] == 0
    assert added[1]["event"] == "added" and group["last-delivered-id"] < added[0]


@pytest.mark.django_db
def test_enqueue_at_maxmemory_is_a_clear_503(
    api: ApiClient, q: Queue, qname: str
) -> None:
    """Redis at maxmemory (noeviction) refuses the write: the producer gets 503
    redis_unavailable saying why and that nothing was written, not a 500; the
    same request succeeds once memory is freed."""
    from tests.api.test_validation import assert_error

    client = q.client
    policy = client.config_get("maxmemory-policy")["maxmemory-policy"]
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)
    try:
        response = post(api, qname, {"name": "txt2img", "data": {"p": 1}})
        assert_error(response, 503, "redis_unavailable")
        assert "out of memory" in response.json()["error"]["message"]
    finally:
        client.config_set("maxmemory", 0)
        client.config_set("maxmemory-policy", policy)
    assert q.get_counts("waiting")["waiting"] == 0  # nothing was written
    assert post(api, qname, {"name": "txt2img", "data": {"p": 1}}).status_code == 201
