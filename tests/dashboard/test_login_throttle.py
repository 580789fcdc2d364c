"""Failed logins are throttled per username and client address, counted in
Redis (shared by every dashboard process), with a clear message and audit
entries: on the dashboard's /login/, Django admin's login and any
authenticate() call alike (one authentication backend), the address taken
from X-Forwarded-For only behind BULLPEN_TRUSTED_PROXY_COUNT proxies."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.contrib.auth import aauthenticate, authenticate
from django.contrib.auth.models import User
from django.test import Client, RequestFactory

from dashboard.console.login_throttle import failures_key
from dashboard.console.models import AuditEntry

PASSWORD = "correct-horse-battery"


@pytest.fixture
def throttle(settings: Any, dashboard_redis: str, db: None) -> str:
    """Three failures lock out a username and address for a minute."""
    settings.BULLPEN_LOGIN_MAX_FAILURES = 3
    settings.BULLPEN_LOGIN_LOCKOUT_S = 60
    User.objects.create_user("ops", password=PASSWORD, is_staff=True)
    return dashboard_redis


def attempt(
    password: str,
    address: str = "10.0.0.1",
    username: str = "ops",
    path: str = "/login/",
    **headers: str,
) -> Any:
    client = Client(REMOTE_ADDR=address, **headers)
    return client.post(path, {"username": username, "password": password})


def admin_attempt(password: str, **kwargs: Any) -> Any:
    return attempt(password, path="/admin/login/", **kwargs)


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


def test_the_admin_login_is_throttled_too(throttle: str) -> None:
    """Django admin's login counts failures like /login/ and, past the limit,
    refuses the right password with 429 and the same message (audited)."""
    for _ in range(3):
        assert admin_attempt("wrong").status_code == 200
    refused = admin_attempt(PASSWORD)
    assert refused.status_code == 429
    assert (
        "Too many failed logins for ops from your address" in refused.content.decode()
    )
    assert "_auth_user_id" not in refused.client.session
    outcomes = AuditEntry.objects.filter(target="user:ops").order_by("id")
    assert [e.outcome for e in outcomes] == ["error", "denied"]
    assert admin_attempt(PASSWORD, address="10.0.0.2").status_code == 302


def test_a_user_locked_on_login_is_locked_on_the_admin(throttle: str) -> None:
    """Failures on /login/ and on /admin/login/ are one count: once /login/
    locked the user, the admin refuses the right password, and the other way
    round."""
    for _ in range(3):
        attempt("wrong")
    assert admin_attempt(PASSWORD).status_code == 429
    attempt("wrong", address="10.0.0.5")
    admin_attempt("wrong", address="10.0.0.5")
    attempt("wrong", address="10.0.0.5")
    assert attempt(PASSWORD, address="10.0.0.5").status_code == 429


def test_any_authenticate_call_shares_the_count(throttle: str) -> None:
    """authenticate() itself is throttled: failures there lock /login/ for
    that address, and a locked pair gets no user even with the password."""
    request = RequestFactory().post("/elsewhere/", REMOTE_ADDR="10.0.0.9")
    for _ in range(3):
        assert authenticate(request, username="ops", password="wrong") is None
    assert authenticate(request, username="ops", password=PASSWORD) is None
    assert attempt(PASSWORD, address="10.0.0.9").status_code == 429
    assert authenticate(None, username="ops", password=PASSWORD) is not None
    # Django's async authenticate goes through the same count.
    check = async_to_sync(aauthenticate)
    assert check(request, username="ops", password=PASSWORD) is None


def test_behind_one_trusted_proxy_the_forwarded_client_counts(
    throttle: str, settings: Any
) -> None:
    """With BULLPEN_TRUSTED_PROXY_COUNT = 1 the client is the last address of
    X-Forwarded-For (what the proxy appended): clients behind one proxy are
    counted apart, and an address the client wrote itself changes nothing."""
    settings.BULLPEN_TRUSTED_PROXY_COUNT = 1
    proxy = "10.0.0.254"
    for spoofed in ["198.51.100.7", "1.1.1.1, 198.51.100.7", "2.2.2.2,198.51.100.7"]:
        assert attempt("wrong", proxy, HTTP_X_FORWARDED_FOR=spoofed).status_code == 200
    locked = attempt(PASSWORD, proxy, HTTP_X_FORWARDED_FOR="9.9.9.9, 198.51.100.7")
    assert locked.status_code == 429
    other = attempt(PASSWORD, proxy, HTTP_X_FORWARDED_FOR="198.51.100.8")
    assert other.status_code == 302
    conn = redis.Redis.from_url(throttle)
    assert conn.exists(failures_key("ops", "198.51.100.7"))
    assert not conn.exists(failures_key("ops", proxy))


def test_without_trusted_proxies_the_header_is_ignored(throttle: str) -> None:
    """With the default (0) X-Forwarded-For is not read: a client sending a
    new one with every attempt is still locked out at its own address."""
    for n in range(3):
        forged = {"HTTP_X_FORWARDED_FOR": f"203.0.113.{n}"}
        assert attempt("wrong", **forged).status_code == 200
    forged = {"HTTP_X_FORWARDED_FOR": "203.0.113.77"}
    assert attempt(PASSWORD, **forged).status_code == 429
    assert admin_attempt(PASSWORD, **forged).status_code == 429
