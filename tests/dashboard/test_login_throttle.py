"""Failed logins are throttled per username and client address, counted in
Redis (shared by every dashboard process), with a clear message and audit
entries."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client

from dashboard.models import AuditEntry
from dashboard.views.auth import failures_key

PASSWORD = "correct-horse-battery"


@pytest.fixture
def throttle(settings: Any, dashboard_redis: str, db: None) -> str:
    """Three failures lock out a username and address for a minute."""
    settings.BULLPEN_LOGIN_MAX_FAILURES = 3
    settings.BULLPEN_LOGIN_LOCKOUT_S = 60
    User.objects.create_user("ops", password=PASSWORD)
    return dashboard_redis


def attempt(password: str, address: str = "10.0.0.1", username: str = "ops") -> Any:
    client = Client(REMOTE_ADDR=address)
    return client.post("/login/", {"username": username, "password": password})


def test_locked_out_after_failures_even_with_the_right_password(
    throttle: str,
) -> None:
    """After the allowed failures the right password is refused too (429,
    "try again in 1 minute(s)"), the lockout and the refusal are audited, and
    the count sits in Redis with the lockout as its expiry."""
    for _ in range(3):
        assert attempt("wrong").status_code == 200
    refused = attempt(PASSWORD)
    assert refused.status_code == 429
    text = refused.content.decode()
    assert "Too many failed logins for ops from your address" in text
    assert "try again in 1 minute(s)" in text
    assert "_auth_user_id" not in refused.client.session
    entries = list(AuditEntry.objects.filter(target="user:ops").order_by("id"))
    assert [(e.action, e.outcome) for e in entries] == [
        ("login", "error"),
        ("login", "denied"),
    ]
    assert "3 failed logins from 10.0.0.1" in entries[0].detail
    conn = redis.Redis.from_url(throttle)
    assert 0 < conn.ttl(failures_key("ops", "10.0.0.1")) <= 60


def test_other_addresses_and_a_success_are_not_held_back(throttle: str) -> None:
    """The lockout is per username and address: the same user from another
    address logs in; a success clears that address's failures."""
    for _ in range(3):
        attempt("wrong")
    assert attempt(PASSWORD).status_code == 429
    assert attempt(PASSWORD, address="10.0.0.2").status_code == 302
    attempt("wrong", address="10.0.0.3")
    attempt("wrong", address="10.0.0.3")
    assert attempt(PASSWORD, address="10.0.0.3").status_code == 302
    attempt("wrong", address="10.0.0.3")
    attempt("wrong", address="10.0.0.3")
    assert attempt(PASSWORD, address="10.0.0.3").status_code == 302


def test_the_lockout_ends(throttle: str) -> None:
    """Once the failures' key expires the user may log in again."""
    for _ in range(3):
        attempt("wrong")
    assert attempt(PASSWORD).status_code == 429
    redis.Redis.from_url(throttle).delete(failures_key("ops", "10.0.0.1"))
    assert attempt(PASSWORD).status_code == 302
