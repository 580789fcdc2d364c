"""Tokens: hashed, scoped to queues and to read/write, revocable, rate
limited in Redis; job tickets; the public OpenAPI document."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest
import redis
from django.test import Client

from dashboard.api.models import ApiToken
from queues import Queue
from tests.api.conftest import ApiClient
from tests.api.test_validation import assert_error


def jobs(queue: str) -> str:
    return f"/api/v1/queues/{queue}/jobs"


@pytest.mark.django_db
def test_tokens_are_stored_hashed(make_token: Any) -> None:
    """Only the SHA-256 of a token and its public prefix are stored."""
    token, plain = make_token()
    assert plain.startswith(token.prefix + "_")
    assert token.key_hash == hashlib.sha256(plain.encode()).hexdigest()
    stored = ApiToken.objects.filter(pk=token.pk).values().get()
    assert plain not in {str(v) for v in stored.values()}


@pytest.mark.django_db
def test_missing_malformed_unknown_and_revoked_tokens(
    make_token: Any, qname: str
) -> None:
    """401 with WWW-Authenticate: no token, a malformed header, an unknown
    token, a revoked token."""
    response = Client().get(f"/api/v1/queues/{qname}")
    assert_error(response, 401, "missing_token")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert_error(
        Client().get(f"/api/v1/queues/{qname}", HTTP_AUTHORIZATION="Basic eDp5"),
        401,
        "invalid_token",
    )
    token, plain = make_token()
    forged = plain[:-4] + ("AAAA" if not plain.endswith("AAAA") else "BBBB")
    assert_error(ApiClient(forged).get(f"/api/v1/queues/{qname}"), 401, "invalid_token")
    assert ApiClient(plain).get(f"/api/v1/queues/{qname}").status_code == 200
    token.revoke()
    assert_error(ApiClient(plain).get(f"/api/v1/queues/{qname}"), 401, "revoked_token")


@pytest.mark.django_db
def test_read_only_token(make_token: Any, q: Queue, qname: str) -> None:
    """A read token reads, and may neither enqueue nor cancel."""
    job = q.add("a", {})
    client = ApiClient(make_token(read=True, write=False)[1])
    assert client.get(f"/api/v1/queues/{qname}/jobs/{job.id}").status_code == 200
    assert client.get(f"/api/v1/queues/{qname}").status_code == 200
    assert_error(
        client.post_json(jobs(qname), {"name": "a"}), 403, "insufficient_scope"
    )
    assert_error(
        client.delete(f"/api/v1/queues/{qname}/jobs/{job.id}"),
        403,
        "insufficient_scope",
    )
    assert q.get_job(job.id) is not None


@pytest.mark.django_db
def test_write_only_token(make_token: Any, q: Queue, qname: str) -> None:
    """A write token enqueues and cancels, and reads nothing."""
    client = ApiClient(make_token(read=False, write=True)[1])
    created = client.post_json(jobs(qname), {"name": "a"})
    assert created.status_code == 201
    job_id = created.json()["id"]
    for path in (
        f"/api/v1/queues/{qname}/jobs/{job_id}",
        f"/api/v1/queues/{qname}",
        "/api/v1/queues",
        f"/api/v1/queues/{qname}/jobs/{job_id}/events",
        f"/api/v1/queues/{qname}/jobs/{job_id}/deliveries",
    ):
        assert_error(client.get(path), 403, "insufficient_scope")
    assert client.delete(f"/api/v1/queues/{qname}/jobs/{job_id}").status_code == 200


@pytest.mark.django_db
def test_queue_scope(make_token: Any, api_redis: str) -> None:
    """A token names its queues: others are 403; `*` is every queue but the
    internal webhook delivery queue, which no token may touch."""
    client = ApiClient(make_token(queues="render, upscale")[1])
    assert client.post_json(jobs("render"), {"name": "a"}).status_code == 201
    assert client.get("/api/v1/queues/upscale").status_code == 200
    assert_error(
        client.post_json(jobs("video"), {"name": "a"}), 403, "queue_not_allowed"
    )
    assert_error(client.get("/api/v1/queues/video"), 403, "queue_not_allowed")
    listed = client.get("/api/v1/queues").json()["queues"]
    assert [row["queue"] for row in listed] == ["render", "upscale"]
    anything = ApiClient(make_token(queues="*")[1])
    assert anything.post_json(jobs("video"), {"name": "a"}).status_code == 201
    assert_error(
        anything.post_json(jobs("bullpen-webhooks"), {"name": "a"}),
        403,
        "queue_not_allowed",
    )
    names = [row["queue"] for row in anything.get("/api/v1/queues").json()["queues"]]
    assert "render" in names and "video" in names and "bullpen-webhooks" not in names


@pytest.mark.django_db
def test_rate_limit_per_token_in_redis(
    make_token: Any, qname: str, r: redis.Redis
) -> None:
    """A token allowed 3 requests a minute gets 3 answers then 429 with
    Retry-After; another token is not affected; the state is in Redis."""
    token, plain = make_token(rate=3)
    limited = ApiClient(plain)
    remaining = [
        limited.get(f"/api/v1/queues/{qname}")["RateLimit-Remaining"] for _ in range(3)
    ]
    assert remaining == ["2", "1", "0"]
    response = limited.get(f"/api/v1/queues/{qname}")
    error = assert_error(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 20
    assert error["details"]["retry_after_s"] == int(response["Retry-After"])
    assert ApiClient(make_token()[1]).get(f"/api/v1/queues/{qname}").status_code == 200
    assert r.pttl(f"bullpen:api:rl:t{token.pk}") > 0


#: How far past its burst test_rate_limit_refills puts a token's bucket: more
#: than one request can take, on a loaded machine too.
OVER_MS = 3_000


@pytest.mark.django_db
def test_rate_limit_refills(make_token: Any, qname: str, r: redis.Redis) -> None:
    """The bucket refills evenly: once the time it was over by and one
    interval have passed, one more request passes. (It was over by 300 ms,
    which one request of a loaded machine once took: the limiter then read a
    bucket already refilled. Over by OVER_MS now, and the refill waited out.)"""
    token, plain = make_token(rate=600)  # one per 100 ms, bursts of 600
    key = f"bullpen:api:rl:t{token.pk}"
    now = time.time() * 1000
    r.set(key, str(now + 60_000 + OVER_MS), px=70_000)  # 600 used, and then some
    client = ApiClient(plain)
    response = client.get(f"/api/v1/queues/{qname}")
    assert response.status_code == 429
    interval_ms = 60_000 / 600
    assert 1 <= int(response["Retry-After"]) <= -(-(OVER_MS + interval_ms) // 1000)
    time.sleep(max(0.0, (now + OVER_MS + interval_ms) / 1000 - time.time()) + 0.2)
    assert client.get(f"/api/v1/queues/{qname}").status_code == 200


@pytest.mark.django_db
def test_ticket_reads_its_job_only(api: ApiClient, q: Queue, qname: str) -> None:
    """The ticket an enqueue returns reads that job's status (and events)
    without a token, and nothing else; a tampered ticket is a 401."""
    created = api.post_json(jobs(qname), {"name": "a"}).json()
    other = api.post_json(jobs(qname), {"name": "b"}).json()
    anonymous = Client()
    ticket = created["ticket"]
    status = anonymous.get(created["status_url"], {"ticket": ticket})
    assert status.status_code == 200 and status.json()["id"] == created["id"]
    assert_error(
        anonymous.get(other["status_url"], {"ticket": ticket}),
        403,
        "insufficient_scope",
    )
    assert_error(
        anonymous.get(f"/api/v1/queues/{qname}", {"ticket": ticket}),
        401,
        "missing_token",
    )
    assert_error(
        anonymous.delete(created["status_url"] + f"?ticket={ticket}"),
        401,
        "missing_token",
    )
    assert_error(
        anonymous.get(created["status_url"], {"ticket": ticket[:-2] + "xx"}),
        401,
        "invalid_ticket",
    )


def test_openapi_document_is_public(db: None) -> None:
    """GET /api/v1/openapi.json needs no token."""
    response = Client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.1")


@pytest.mark.django_db
def test_star_listing_uses_cached_discovery(
    make_token: Any, api_redis: str, settings: Any, monkeypatch: Any
) -> None:
    """A `*` token's listing does not SCAN the keyspace on every call: a
    costly scan's result is reused (as the dashboard's is) and refreshed in
    the background, while a cheap one is redone so a new queue shows at once."""
    from dashboard.api import discovery

    settings.BULLPEN_DISCOVERY_TTL_S = 60
    client = ApiClient(make_token(queues="*")[1])
    assert client.post_json(jobs("first"), {"name": "a"}).status_code == 201

    def listed() -> list[str]:
        return [row["queue"] for row in client.get("/api/v1/queues").json()["queues"]]

    assert listed() == ["first"]
    [row] = client.get("/api/v1/queues").json()["queues"]
    assert row == client.get("/api/v1/queues/first").json()  # same body, batched
    assert row["counts"]["waiting"] == 1 and row["paused"] is False
    time.sleep(discovery.api_queues.ttl() + 0.01)  # a cheap scan is redone
    assert client.post_json(jobs("second"), {"name": "a"}).status_code == 201
    assert listed() == ["first", "second"]

    scans: list[object] = []
    real = discovery.discover_queues

    def counted(*args: Any) -> Any:
        scans.append(args)
        return real(*args)

    monkeypatch.setattr(discovery, "discover_queues", counted)
    discovery.api_queues.scan_s = 1.0  # as if a million keys: fresh for 20 s
    assert client.post_json(jobs("third"), {"name": "a"}).status_code == 201
    for _ in range(5):
        assert listed() == ["first", "second"]
    assert scans == []
    discovery.api_queues.at -= 120  # stale: answered at once, rescanned behind
    assert listed() == ["first", "second"]
    deadline = time.monotonic() + 5
    while "third" not in listed():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert scans  # the rescan went through discovery
