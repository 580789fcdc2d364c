"""Webhooks end to end, in process: the API registers a job's webhook, a
queue worker runs the job, the dispatcher reads the events stream and
delivers signed, ordered, retried webhooks to a loopback receiver."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import redis

from dashboard.api import store
from dashboard.api.models import ApiToken, WebhookSubscription
from dashboard.api.webhooks import deliveries, signing
from dashboard.api.webhooks.dispatcher import Dispatcher
from queues import Job, Queue
from tests.api.conftest import ApiClient
from tests.api.helpers import Received, Receiver, WorkerThread, dispatching, fast_config
from tests.helpers import wait_until


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    yield rec
    rec.close()


@pytest.fixture
def private_ok(settings: Any) -> None:
    """The receivers listen on 127.0.0.1: allow private destinations."""
    settings.BULLPEN_WEBHOOK_ALLOW_PRIVATE = True


async def three_steps(job: Job) -> dict[str, Any]:
    for pct in (25, 50, 75):
        await job.update_progress(pct)
        await asyncio.sleep(0.02)
    if job.data.get("fail"):
        raise RuntimeError("asked to fail")
    return {"url": f"s3://out/{job.id}.png"}


def enqueue(api: ApiClient, queue: str, url: str, **options: Any) -> str:
    response = api.post_json(
        f"/api/v1/queues/{queue}/jobs",
        {
            "name": "render",
            "data": options.pop("data", {}),
            "options": {"webhook_url": url, **options},
        },
    )
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


@pytest.mark.django_db
def test_job_webhook_active_progress_completed_signed_in_order(
    api: ApiClient, private_ok: None, receiver: Receiver, qname: str, api_redis: str
) -> None:
    """A job enqueued with a webhook URL sends active, each progress and
    completed (with its return value), in order, each verifiable with the
    token's webhook secret; the attempts show in the job's delivery log."""
    job_id = enqueue(api, qname, receiver.url())
    secret = ApiToken.objects.get().webhook_secret
    with dispatching(fast_config()):
        worker = WorkerThread(qname, three_steps, api_redis)
        try:
            wait_until(lambda: len(receiver.requests) >= 5, what="5 webhooks")
        finally:
            worker.stop()
    assert receiver.events() == [
        "active",
        "progress",
        "progress",
        "progress",
        "completed",
    ]
    bodies = [r.json for r in receiver.requests]
    assert [b["progress"] for b in bodies[1:4]] == [25, 50, 75]
    assert bodies[-1]["returnvalue"] == {"url": f"s3://out/{job_id}.png"}
    assert {b["job_id"] for b in bodies} == {job_id}
    assert all(b["queue"] == qname and b["attempt"] == 1 for b in bodies)
    for r in receiver.requests:
        signing.verify_headers(secret, r.body, r.headers)
        assert r.headers["X-Bullpen-Event"] == r.json["event"]
        assert r.headers["X-Bullpen-Delivery"] == r.json["id"]
    log = api.get(f"/api/v1/queues/{qname}/jobs/{job_id}/deliveries").json()
    assert [d["outcome"] for d in log["deliveries"]] == ["delivered"] * 5
    assert [d["event"] for d in reversed(log["deliveries"])] == receiver.events()
    assert all(d["status_code"] == 200 for d in log["deliveries"])


@pytest.mark.django_db
def test_failed_job_reports_its_reason_after_retries(
    api: ApiClient, private_ok: None, receiver: Receiver, qname: str, api_redis: str
) -> None:
    """A job failing its two attempts sends active twice (with progress) and
    one final failed webhook carrying the reason."""
    enqueue(
        api,
        qname,
        receiver.url(),
        data={"fail": True},
        attempts=2,
        backoff=50,
        webhook_events=["active", "failed"],
    )
    with dispatching(fast_config()):
        worker = WorkerThread(qname, three_steps, api_redis)
        try:
            wait_until(lambda: "failed" in receiver.events(), what="failed webhook")
        finally:
            worker.stop()
    assert receiver.events() == ["active", "active", "failed"]
    assert receiver.requests[-1].json["failed_reason"] == "asked to fail"


@pytest.mark.django_db
def test_queue_subscription_gets_its_events_signed_with_its_secret(
    private_ok: None, receiver: Receiver, q: Queue, qname: str, api_redis: str
) -> None:
    """A subscription made in the admin (mirrored to Redis on save) gets the
    events it asked for, of every job of its queue, signed with its secret."""
    sub = WebhookSubscription.objects.create(
        queue=qname, url=receiver.url(), events="completed"
    )
    with dispatching(fast_config()):
        q.add("a", {})
        q.add("b", {})
        worker = WorkerThread(qname, three_steps, api_redis)
        try:
            wait_until(lambda: len(receiver.requests) >= 2, what="2 webhooks")
        finally:
            worker.stop()
    assert receiver.events() == ["completed", "completed"]
    for r in receiver.requests:
        signing.verify_headers(sub.secret, r.body, r.headers)
    sub.delete()
    assert store.client().hget(store.keys().subscriptions, str(sub.pk)) is None


@pytest.mark.django_db
def test_progress_webhooks_are_throttled(
    api: ApiClient, private_ok: None, receiver: Receiver, qname: str, api_redis: str
) -> None:
    """Twenty progress updates within a few ms send one progress webhook when
    the interval is 1 s (event time); active and completed are never dropped."""

    async def chatty(job: Job) -> int:
        for pct in range(5, 101, 5):
            await job.update_progress(pct)
        return 1

    enqueue(api, qname, receiver.url())
    with dispatching(fast_config(progress_interval_ms=1000)):
        worker = WorkerThread(qname, chatty, api_redis)
        try:
            wait_until(lambda: "completed" in receiver.events(), what="completed")
        finally:
            worker.stop()
    assert receiver.events() == ["active", "progress", "completed"]
    assert receiver.requests[1].json["progress"] == 5


@pytest.mark.django_db
def test_delivery_retries_with_exponential_backoff_then_succeeds(
    api: ApiClient, private_ok: None, qname: str, api_redis: str
) -> None:
    """A receiver failing twice then answering 200 gets three attempts spaced
    by the exponential backoff (100 ms, then 200 ms); the log shows retrying,
    retrying, delivered; later events wait their turn and arrive in order."""
    receiver = Receiver(behaviour=lambda i, r: (500 if i < 2 else 200, {}))
    try:
        enqueue(api, qname, receiver.url(), webhook_events=["active", "completed"])
        with dispatching(fast_config(backoff_ms=100, attempts=4)):
            worker = WorkerThread(qname, three_steps, api_redis)
            try:
                wait_until(lambda: len(receiver.requests) >= 4, what="4 requests")
            finally:
                worker.stop()
        assert receiver.events() == ["active", "active", "active", "completed"]
        at = [r.at for r in receiver.requests]
        assert at[1] - at[0] >= 0.09
        assert at[2] - at[1] >= 0.19
        assert [r.json["attempt"] for r in receiver.requests[:3]] == [1, 2, 3]
        job_id = receiver.requests[0].json["job_id"]
        log = deliveries.for_job(store.client(), store.keys(), f"bull:{qname}", job_id)
        outcomes = [(d["event"], d["outcome"], d["status_code"]) for d in reversed(log)]
        assert outcomes == [
            ("active", "retrying", 500),
            ("active", "retrying", 500),
            ("active", "delivered", 200),
            ("completed", "delivered", 200),
        ]
    finally:
        receiver.close()


@pytest.mark.django_db
def test_delivery_that_keeps_failing_ends_failed_and_the_next_one_goes(
    api: ApiClient, private_ok: None, qname: str, api_redis: str
) -> None:
    """After its last attempt a delivery is failed for good (logged as such)
    and the job's next webhook is sent."""
    receiver = Receiver(
        behaviour=lambda i, r: (503 if r.json["event"] == "active" else 200, {})
    )
    try:
        enqueue(api, qname, receiver.url(), webhook_events=["active", "completed"])
        with dispatching(fast_config(backoff_ms=20, attempts=2)):
            worker = WorkerThread(qname, three_steps, api_redis)
            try:
                wait_until(lambda: "completed" in receiver.events(), what="completed")
            finally:
                worker.stop()
        assert receiver.events() == ["active", "active", "completed"]
        job_id = receiver.requests[0].json["job_id"]
        log = deliveries.for_job(store.client(), store.keys(), f"bull:{qname}", job_id)
        assert [d["outcome"] for d in reversed(log)] == [
            "retrying",
            "failed",
            "delivered",
        ]
        failed = Queue(  # the delivery job itself ended failed, with the reason
            "bullpen-webhooks", api_redis
        ).get_job(log[1]["delivery_id"])
        assert "HTTP 503" in failed.failed_reason
    finally:
        receiver.close()


@pytest.mark.django_db
def test_refused_destination_is_not_retried(
    api: ApiClient, settings: Any, qname: str, api_redis: str, r: redis.Redis
) -> None:
    """A job webhook whose host name resolves to 127.0.0.1 passes the enqueue
    check (no DNS there) but is refused at delivery, before any connection and
    without retries, when private destinations are not allowed; the refusal
    is in the delivery log."""
    settings.BULLPEN_WEBHOOK_ALLOW_PRIVATE = False
    job_id = enqueue(
        api, qname, "http://hooks.example.test:9/hook", webhook_events=["active"]
    )

    def resolver(host: str, port: int) -> list[str]:
        assert host == "hooks.example.test"
        return ["127.0.0.1"]

    with dispatching(fast_config(), resolver=resolver):
        worker = WorkerThread(qname, three_steps, api_redis)
        try:
            log = wait_until(
                lambda: deliveries.for_job(
                    store.client(), store.keys(), f"bull:{qname}", job_id
                ),
                what="a delivery record",
            )
        finally:
            worker.stop()
    assert [d["outcome"] for d in log] == ["refused"]
    assert "resolves to 127.0.0.1" in log[0]["error"]
    job = Queue("bullpen-webhooks", api_redis).get_job(log[0]["delivery_id"])
    assert job.attempts_made == 1 and "refused" in job.failed_reason


def _fake_event(r: redis.Redis, qname: str, job_id: str) -> str:
    return str(
        r.xadd(
            f"bull:{qname}:events",
            {"event": "completed", "jobId": job_id, "returnvalue": "1"},
        )
    )


@pytest.mark.django_db
def test_entries_read_but_never_acknowledged_are_delivered_after_a_restart(
    private_ok: None, receiver: Receiver, qname: str, r: redis.Redis, api_redis: str
) -> None:
    """A dispatcher that dies between reading events and acknowledging them
    loses nothing: the next one (same consumer name) re-reads its pending
    entries first; entries of a dead consumer of another host are claimed
    after the idle time. Each event is delivered exactly once."""
    WebhookSubscription.objects.create(queue=qname, url=receiver.url())
    config = fast_config(claim_idle_ms=300)
    crashed = Dispatcher(config)
    crashed.reader.refresh(force=True)
    ids = [_fake_event(r, qname, f"j{i}") for i in range(3)]
    # Read (the entries become pending for "test-host"), then "die".
    got = crashed.reader._read({f"bull:{qname}:events": ">"}, None)
    assert [e[0] for e in got[0][1]] == ids
    other = Dispatcher(replace_consumer(config, "other-host"))
    other.reader.refresh(force=True)
    ids2 = [_fake_event(r, qname, f"k{i}") for i in range(2)]
    other.reader._read({f"bull:{qname}:events": ">"}, None)  # dies too
    with dispatching(config):
        wait_until(lambda: len(receiver.requests) >= 5, what="5 webhooks")
    delivered = sorted(req.json["event_id"] for req in receiver.requests)
    assert delivered == sorted(ids + ids2)
    pending = r.xpending(f"bull:{qname}:events", "bullpen-webhooks")
    assert pending["pending"] == 0


def replace_consumer(config: Any, consumer: str) -> Any:
    return replace(config, consumer=consumer)


def test_received_helper_parses_json() -> None:
    """(The receiver helper's own sanity check.)"""
    assert Received(0.0, "/", {}, b'{"event": "x"}').json == {"event": "x"}
