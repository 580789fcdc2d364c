"""Failed logins sent at once are throttled atomically: against a real daphne
(real sockets, its thread pool) with a limit of 5, 16 wrong logins sent
together, half to /login/ and half to Django admin's login, get 5 ordinary
answers and 11 refusals (429); the count stops at 5, so no more than 5
passwords were checked."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import redis
import requests

from dashboard.console.login_throttle import failures_key
from tests.dashboard.daphne_helpers import ROOT, daphne

LIMIT = 5
ATTEMPTS = 16
PASSWORD = "correct-horse-battery-staple"
_USER = (
    "from django.contrib.auth.models import User; "
    f"User.objects.create_user('ops', password={PASSWORD!r}, is_staff=True)"
)


def login_form(base: str, path: str) -> tuple[requests.Session, str]:
    """A session holding the CSRF cookie of the login page, and its token."""
    session = requests.Session()
    page = session.get(base + path, timeout=60)
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert found, page.text[:300]
    return session, found[1]


def post(session: requests.Session, url: str, token: str, password: str) -> int:
    """POST one login; its status (redirects not followed)."""
    data = {"username": "ops", "password": password, "csrfmiddlewaretoken": token}
    return session.post(url, data=data, allow_redirects=False, timeout=300).status_code


def test_wrong_logins_sent_at_once_reach_the_password_check_at_most_limit_times(
    tmp_path: Path, redis_url: str
) -> None:
    """5 ordinary answers, 11 refused, a count of 5; then the right password
    is refused on both login pages."""
    extra = {"BULLPEN_LOGIN_MAX_FAILURES": str(LIMIT)}
    with daphne(tmp_path, redis_url, **extra) as server:
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", _USER],
            cwd=ROOT,
            env=server.env,
            check=True,
            capture_output=True,
        )
        paths = ["/login/", "/admin/login/"] * (ATTEMPTS // 2)
        forms = [(path, *login_form(server.url, path)) for path in paths]
        start = threading.Barrier(ATTEMPTS)
        statuses: list[int] = []

        def send(path: str, session: requests.Session, token: str) -> None:
            start.wait()
            statuses.append(post(session, server.url + path, token, "wrong"))

        threads = [threading.Thread(target=send, args=form) for form in forms]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses) == [200] * LIMIT + [429] * (ATTEMPTS - LIMIT)
        conn = redis.Redis.from_url(redis_url)
        assert int(conn.get(failures_key("ops", "127.0.0.1")) or 0) == LIMIT
        for path in ["/login/", "/admin/login/"]:
            session, token = login_form(server.url, path)
            assert post(session, server.url + path, token, PASSWORD) == 429
