"""`/healthz` answers 200 without Redis or a login; `/readyz` answers 200 only
when Redis, the database and every migration are ready, else 503 naming what
is not, with no password in it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from dashboard.console import reads
from dashboard.console.views.health import forget_migrations
from dashboard.shared.redis import PROBE_TIMEOUT_S
from dashboard.shared.redis import client as dashboard_client
from dashboard.shared.redis import reset as redis_reset
from tests.dashboard.daphne_helpers import daphne
from tests.dashboard.helpers import get_while_hung
from tests.redis_server import RedisServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_redis(settings: Any) -> Iterator[RedisServer]:
    """A redis-server of this test's own (the test stops it)."""
    server = RedisServer().start()
    settings.REDIS_URL = server.url
    reads.reset()
    redis_reset()
    forget_migrations()
    yield server
    server.stop()
    reads.reset()
    redis_reset()


def test_healthz_answers_without_redis_or_login(own_redis: RedisServer) -> None:
    """200 {"status": "ok"}, anonymous, with Redis stopped; CSP still sent."""
    client = Client()
    own_redis.stop()
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "Content-Security-Policy" in response
    assert client.post("/healthz").status_code == 405


def test_readyz_ready_then_names_a_stopped_redis(own_redis: RedisServer) -> None:
    """200 with everything up; 503 naming Redis once it is stopped."""
    client = Client()
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "status": "ok",
        "redis": "ok",
        "database": "ok",
        "migrations": "ok",
    }
    own_redis.stop()
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unready"
    assert body["redis"].startswith("down: "), body
    assert body["database"] == "ok"
    assert body["migrations"] == "ok"


def test_readyz_names_a_hung_redis_within_its_probe_timeout(
    own_redis: RedisServer, settings: Any
) -> None:
    """A Redis that stops answering (SIGSTOP: the connection open, no reply)
    is "down" after PROBE_TIMEOUT_S, not after the pages' reply timeout (here
    60 s); the pages' client is not the probe's, and once Redis answers
    again /readyz says ready."""
    settings.BULLPEN_REDIS_TIMEOUT_S = 60.0
    redis_reset()
    client = Client()
    assert client.get("/readyz").status_code == 200
    response, spent = get_while_hung(own_redis, client, "/readyz")
    assert response.status_code == 503
    assert response.json()["redis"].startswith("down: Timeout"), response.json()
    assert PROBE_TIMEOUT_S <= spent < 30, spent
    assert dashboard_client().connection_pool.connection_kwargs["socket_timeout"] == 60
    assert client.get("/readyz").status_code == 200


def test_readyz_hides_the_redis_password(settings: Any) -> None:
    """A Redis URL with a password, nothing listening: the 503 names Redis
    down and holds neither the password nor a traceback."""
    settings.REDIS_URL = "redis://:s3cret-pw@127.0.0.1:1/0"
    redis_reset()
    try:
        response = Client().get("/readyz")
    finally:
        redis_reset()
    assert response.status_code == 503
    assert response.json()["redis"].startswith("down: ")
    assert b"s3cret-pw" not in response.content
    assert b"Traceback" not in response.content


def test_readyz_names_unapplied_migrations(own_redis: RedisServer) -> None:
    """A migration recorded as not applied: 503 with "1 unapplied"; recorded
    again, ready again (not ready is never cached)."""
    recorder = MigrationRecorder(connection)
    last = max(
        (m for m in recorder.migration_qs.filter(app="dashboard")),
        key=lambda m: m.name,
    )
    last.delete()
    try:
        response = Client().get("/readyz")
        assert response.status_code == 503
        assert response.json()["migrations"] == "1 unapplied"
        assert response.json()["redis"] == "ok"
    finally:
        recorder.record_applied(last.app, last.name)
    assert Client().get("/readyz").status_code == 200


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_probes_are_not_redirected_to_https(
    settings: Any, own_redis: RedisServer
) -> None:
    """DJANGO_SECURE_SSL_REDIRECT sends pages to https, but a load balancer's
    plain-HTTP probe, and a scrape from inside the cluster, get their answer."""
    settings.SECURE_SSL_REDIRECT = True
    settings.REDIS_URL = own_redis.url
    client = Client()
    assert client.get("/login/").status_code == 301
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/metrics").status_code == 200


def test_probes_through_daphne_with_production_settings(tmp_path: Path) -> None:
    """Real daphne, DEBUG off: with Redis stopped /readyz is a 503 within
    seconds and /healthz still 200."""
    server = RedisServer().start()
    try:
        with daphne(tmp_path, server.url) as d:
            assert _get(f"{d.url}/healthz") == (200, {"status": "ok"})
            status, body = _get(f"{d.url}/readyz")
            assert (status, body["status"]) == (200, "ok"), body
            server.stop()
            began = time.monotonic()
            status, body = _get(f"{d.url}/readyz")
            assert time.monotonic() - began < 8
            assert status == 503 and body["redis"].startswith("down: "), body
            assert _get(f"{d.url}/healthz") == (200, {"status": "ok"})
    finally:
        server.stop()
