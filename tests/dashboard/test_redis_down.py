"""A dead Redis reads as what it is: every page, fragment and action answers a
503 that names the Redis and the error (never a bare 500), actions are audited
as errors, nothing hangs on an unreachable host, and pages work again as soon
as Redis is back."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from dashboard.console import reads
from dashboard.console.models import AuditEntry
from queues import Queue
from tests.dashboard.helpers import get_while_hung, hx_post, job_url, queue_url
from tests.redis_server import RedisServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_redis(settings: Any) -> Iterator[RedisServer]:
    """A redis-server of this test's own, which the test stops and restarts."""
    server = RedisServer().start()
    settings.REDIS_URL = server.url
    settings.BULLPEN_DISCOVERY_TTL_S = 0
    reads.reset()
    yield server
    server.stop()
    reads.reset()


PAGES = [
    "/",
    "/queues/bull/work/",
    "/queues/bull/work/?state=failed",
    "/queues/bull/work/jobs/1/",
    "/gpus/",
    "/search/?q=1",
    "/triage/",
]


def test_pages_fragments_and_actions_answer_503_then_recover(
    own_redis: RedisServer, admin_client: Client
) -> None:
    q = Queue("work", own_redis.url)
    job = q.add("render", {"prompt": "x"})
    for url in PAGES:
        assert admin_client.get(url).status_code == 200, url

    own_redis.stop()
    for url in PAGES:
        response = admin_client.get(url)
        assert response.status_code == 503, url
        assert response["Retry-After"] == "5"
        body = response.content.decode()
        assert f"Redis at {own_redis.url} is not answering" in body, url
        assert "Connection refused" in body
        assert '<meta http-equiv="refresh" content="5">' in body

    # htmx polls keep their content: the flash goes to #flash instead.
    fragment = admin_client.get(queue_url(q), HTTP_HX_REQUEST="true")
    assert fragment.status_code == 503
    assert fragment["HX-Retarget"] == "#flash"
    assert fragment.content.startswith(b'<div class="flash error"')

    # An action: a 503 flash that says it may not have happened, and an audit row.
    response = hx_post(admin_client, job_url(q, job.id, "remove"), {"confirm": "1"})
    assert response.status_code == 503
    assert b"may not have taken effect" in response.content
    entry = AuditEntry.objects.first()
    assert entry is not None
    assert (entry.action, entry.outcome) == ("job.remove", "error")
    assert entry.detail.startswith("Redis unavailable:")

    own_redis.start()  # same port, empty (no persistence)
    Queue("work", own_redis.url).add("render", {"prompt": "y"})
    for url in PAGES:
        assert admin_client.get(url).status_code == 200, url


def test_a_hung_redis_costs_the_timeout_then_pages_come_back(
    own_redis: RedisServer, admin_client: Client, settings: Any
) -> None:
    """A Redis that stops answering (SIGSTOP: connections open, no replies)
    costs BULLPEN_REDIS_TIMEOUT_S per request, not a hang; when it resumes,
    the same process's pages work again and the data is all there."""
    settings.BULLPEN_REDIS_TIMEOUT_S = 0.5
    reads.reset()
    q = Queue("work", own_redis.url)
    ids = [q.add("render", {"i": i}).id for i in range(3)]
    assert admin_client.get("/").status_code == 200
    response, spent = get_while_hung(own_redis, admin_client, "/queues/bull/work/")
    assert response.status_code == 503
    assert b"Timeout reading from" in response.content
    assert spent < 5, spent
    page = admin_client.get("/queues/bull/work/?state=waiting")
    assert page.status_code == 200
    assert all(f"/jobs/{i}/" in page.content.decode() for i in ids)


def test_unreachable_host_fails_within_the_connect_timeout(
    settings: Any, admin_client: Client
) -> None:
    """A host that never answers the handshake (a listening socket whose
    backlog is full) costs the connect timeout, not the OS's two minutes."""
    with socket.socket() as sink:
        sink.bind(("127.0.0.1", 0))
        sink.listen(0)
        port = sink.getsockname()[1]
        fillers = []
        for _ in range(8):  # fill the accept backlog: later connects hang
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            fillers.append(s)
        settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
        settings.BULLPEN_REDIS_CONNECT_TIMEOUT_S = 0.5
        settings.BULLPEN_REDIS_TIMEOUT_S = 0.5
        reads.reset()
        try:
            started = time.monotonic()
            response = admin_client.get("/")
            spent = time.monotonic() - started
        finally:
            for s in fillers:
                s.close()
            reads.reset()
    assert response.status_code == 503
    assert b"Timeout connecting to" in response.content
    assert spent < 5, spent


def test_an_action_refused_at_maxmemory_is_a_503_that_says_why(
    own_redis: RedisServer, admin_client: Client
) -> None:
    """Redis at maxmemory (noeviction) answers pages but refuses writes: an
    action gets the 503 flash naming the refusal (not a 500), and an audit
    row; once memory is freed the same action works."""
    q = Queue("work", own_redis.url)
    q.add("render", {"prompt": "x"})
    admin = q.client
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    try:
        response = hx_post(admin_client, queue_url(q, "pause"))
        assert response.status_code == 503
        body = response.content.decode()
        assert "refuses this for now: Redis is out of memory" in body
        assert "may not have taken effect" in body
        entry = AuditEntry.objects.first()
        assert entry is not None
        assert (entry.action, entry.outcome) == ("queue.pause", "error")
        assert not q.is_paused()
    finally:
        admin.config_set("maxmemory", 0)
    assert hx_post(admin_client, queue_url(q, "pause")).status_code == 200
    assert q.is_paused()
