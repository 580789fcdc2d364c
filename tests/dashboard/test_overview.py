"""The overview page, served by Django against the real test Redis."""

from __future__ import annotations

import pytest
from django.test import Client

from dashboard import readmodel
from queues import Queue


@pytest.fixture
def dashboard_redis(settings, redis_url: str):  # type: ignore[no-untyped-def]
    """Point the dashboard at the test Redis for one test."""
    settings.REDIS_URL = redis_url
    readmodel.client.cache_clear()
    yield redis_url
    readmodel.client.cache_clear()


@pytest.mark.django_db
def test_overview_requires_login(dashboard_redis: str) -> None:
    """Anonymous users are sent to the login page."""
    response = Client().get("/")
    assert response.status_code == 302
    assert "/login/" in response["Location"]


@pytest.mark.django_db
def test_overview_lists_discovered_queues(dashboard_redis: str, admin_client: Client,
                                          qname: str) -> None:
    """A queue created by any client shows up with its counts and paused flag."""
    q = Queue(qname, dashboard_redis)
    q.add_bulk([{"name": "a", "data": {"n": i}} for i in range(3)])
    q.add("later", {}, delay=60_000)
    q.pause()
    html = admin_client.get("/").content.decode()
    assert f"bull:{qname}" in html
    assert "paused" in html
    row = html[html.index(f"bull:{qname}"):]
    row = row[: row.index("</tr>")]
    cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
    # Default states: active, completed, delayed, failed, prioritized, waiting, waiting-children
    assert cells == ["0", "0", "1", "0", "0", "3", "0"]
