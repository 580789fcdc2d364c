"""The dashboard and API mounted by a host project (tests/hostproject) under
/ops/queues/: every page, redirect, link, htmx attribute, socket path, API URL
and probe stays under the prefix, and nothing of the dashboard answers at the
host's root, where the host's own home page is."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.checks import Error
from django.test import Client

from dashboard.api import discovery
from dashboard.api.models import ApiToken
from dashboard.console.mount_checks import (
    check_channel_layer,
    check_login_backend,
    check_middleware,
    check_templates,
    check_urls,
)
from dashboard.shared import redis as shared_redis
from queues import Queue
from tests.dashboard.helpers import HX, run_jobs

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.hostproject.urls")]

ROOT = Path(__file__).resolve().parents[2]
P = "/ops/queues/"
#: Attributes that hold a URL the browser follows or requests.
URL_ATTRS = re.compile(
    r'\b(?:href|src|action|hx-get|hx-post|data-live-socket)="([^"]*)"'
)


@pytest.fixture
def mounted(dashboard_redis: str, settings: Any) -> Iterator[str]:
    """The dashboard and the API on the flushed test Redis; the host's own
    LOGIN_URL (tests/hostproject/settings.py), which the dashboard ignores."""
    settings.LOGIN_URL = "/accounts/login/"
    shared_redis.reset()
    discovery.reset()
    yield dashboard_redis
    shared_redis.reset()
    discovery.reset()


def urls_in(html: str) -> list[str]:
    """Every URL a page links, posts to, fetches or opens a socket on."""
    return URL_ATTRS.findall(html)


def assert_all_under_prefix(html: str) -> None:
    """Absolute paths only under the prefix or /static/ (none at the root),
    but for the link to the host's own Django admin (staff users)."""
    for url in urls_in(html):
        if url.startswith("/"):
            assert url.startswith((P, "/static/")) or url == "/admin/", url


def test_nothing_of_the_dashboard_answers_at_the_hosts_root(mounted: str) -> None:
    """The host's own page at "/"; the dashboard's paths at the root are the
    host's plain 404s, the API's too (not its JSON)."""
    client = Client()
    home = client.get("/")
    assert home.status_code == 200 and b"Host home" in home.content
    assert "Content-Security-Policy" not in home
    admin = User.objects.create_superuser("root", "", "pw")
    client.force_login(admin)
    for path in [
        "/login/",
        "/queues/bull/x/",
        "/gpus/",
        "/search/",
        "/metrics",
        "/healthz",
        "/readyz",
        "/favicon.ico",
        "/api/v1/queues",
        "/api/v1/openapi.json",
    ]:
        response = client.get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"].startswith("text/html"), path
        assert b"Bullpen" not in response.content, path
    assert client.get("/admin/").status_code == 200


def test_login_logout_and_redirects_stay_under_the_prefix(mounted: str) -> None:
    """Anonymous users go to the dashboard's own login page under the prefix
    (not the host's LOGIN_URL); login and logout return there too; htmx
    fragments get HX-Redirect to it."""
    User.objects.create_user("vera", password="pw").user_permissions.set([])
    client = Client()
    response = client.get(P + "search/")
    assert response.status_code == 302
    assert response["Location"] == P + "login/?next=/ops/queues/search/"
    fragment = client.get(
        P + "fragments/queues/", HTTP_HX_CURRENT_URL="http://testserver" + P, **HX
    )
    assert fragment["HX-Redirect"] == P + "login/?next=/ops/queues/"
    login = client.get(P + "login/")
    assert login.status_code == 200
    assert_all_under_prefix(login.content.decode())
    assert f'action="{P}login/"' in login.content.decode()
    done = client.post(P + "login/", {"username": "vera", "password": "pw"})
    assert done.status_code == 302 and done["Location"] == P
    out = client.post(P + "logout/")
    assert out.status_code == 302 and out["Location"] == P + "login/"
    back = client.post(
        P + "login/", {"username": "vera", "password": "pw", "next": P + "search/"}
    )
    assert back["Location"] == P + "search/"


def test_pages_link_only_under_the_prefix(
    mounted: str, admin_client: Client, q: Queue
) -> None:
    """Overview, queue, job, GPU, search, triage and audit pages: every link,
    form, htmx URL and the live socket's path are under /ops/queues/ (or
    /static/), and the pages they link to answer."""
    [job_id] = run_jobs(q)
    q.upsert_job_scheduler("tick", every_ms=60_000)
    base = f"{P}queues/bull/{q.name}/"
    pages = [
        P,
        base,
        base + "schedulers/",
        base + "?state=failed",
        f"{base}jobs/{job_id}/",
        P + "gpus/",
        P + "search/",
        P + "triage/",
        f"{P}triage/bull/{q.name}/",
        P + "audit/",
    ]
    seen: set[str] = set()
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        assert_all_under_prefix(html)
        assert f'data-live-socket="{P}ws/live/"' in html, page
        assert "Content-Security-Policy" in response, page
        seen.update(u for u in urls_in(html) if u.startswith(P))
    assert f"{base}jobs/{job_id}/actions/retry/" in seen
    assert f"{base}schedulers/tick/actions/edit/" in seen
    seen_paths = {url.split("?")[0] for url in seen}
    assert f"{base}fragments/jobs/" in seen_paths
    assert f"{base}jobs/{job_id}/fragments/detail/" in seen_paths
    assert {P + "fragments/queues/", P + "gpus/fragments/hosts/"} <= seen_paths
    assert "/admin/" in admin_client.get(P).content.decode()
    for url in sorted(seen):
        if "/actions/" in url or url.endswith(("/logout/", "/login/", "/ws/live/")):
            continue
        assert admin_client.get(url, **HX).status_code == 200, url


def test_actions_redirect_under_the_prefix(
    mounted: str, admin_client: Client, q: Queue
) -> None:
    """A plain-form retry returns to its job page under the prefix; htmx gets
    its flash; obliterating a queue sends the browser to the overview there."""
    first, second = run_jobs(q, 2)
    job = f"{P}queues/bull/{q.name}/jobs/{first}/"
    plain = admin_client.post(job + "actions/retry/")
    assert plain.status_code == 303 and plain["Location"] == job
    flash = admin_client.post(
        f"{P}queues/bull/{q.name}/jobs/{second}/actions/retry/", **HX
    )
    assert flash.status_code == 200 and b"retried" in flash.content
    assert q.get_job_state(first).value == "waiting"
    q.pause()
    gone = admin_client.post(
        f"{P}queues/bull/{q.name}/actions/obliterate/", {"confirm": q.name}, **HX
    )
    assert gone["HX-Redirect"] == P


def test_not_found_pages_under_the_prefix(mounted: str, admin_client: Client) -> None:
    """A missing queue is the dashboard's 404 page, linking back under the
    prefix; an unknown API path is the API's JSON 404."""
    page = admin_client.get(P + "queues/bull/nope/")
    assert page.status_code == 404
    html = page.content.decode()
    assert 'id="not-found"' in html and f'href="{P}"' in html
    assert_all_under_prefix(html)
    for path in ["api/v1/nope", "api/v2/queues", "api/"]:
        response = admin_client.get(P + path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found", path


def test_api_under_the_prefix(mounted: str, qname: str) -> None:
    """Enqueue and read a job under /ops/queues/api/v1/: the URLs it answers
    with, and the OpenAPI document's server, are under the prefix."""
    _, token = ApiToken.issue("host", "*", True, True)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    made = client.post(
        f"{P}api/v1/queues/{qname}/jobs",
        {"name": "gen", "data": {"p": 1}},
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    body = made.json()
    status_url = f"http://testserver{P}api/v1/queues/{qname}/jobs/{body['id']}"
    assert body["status_url"] == status_url == made["Location"]
    assert body["events_url"] == status_url + "/events"
    read = client.get(status_url.removeprefix("http://testserver"))
    assert read.status_code == 200 and read.json()["data"] == {"p": 1}
    by_ticket = Client().get(
        f"{P}api/v1/queues/{qname}/jobs/{body['id']}", {"ticket": body["ticket"]}
    )
    assert by_ticket.status_code == 200
    assert client.get(f"{P}api/v1/queues").status_code == 200
    spec = Client().get(P + "api/v1/openapi.json").json()
    assert spec["servers"] == [{"url": "/ops/queues/api/v1"}]


def test_probes_and_metrics_under_the_prefix(mounted: str, settings: Any) -> None:
    """/healthz, /readyz and /metrics answer under the prefix; with HTTPS
    redirects on, the exemption bullpen.W001 proposes keeps the probes on
    plain HTTP while pages are redirected."""
    client = Client()
    assert client.get(P + "healthz").json() == {"status": "ok"}
    assert client.get(P + "readyz").status_code == 200
    metrics = client.get(P + "metrics")
    assert metrics.status_code == 200 and b"bullpen_" in metrics.content
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    [warning] = check_urls()
    assert warning.id == "bullpen.W001"
    assert "/ops/queues/healthz" in warning.msg
    assert warning.hint == r"Add r'^ops/queues/(healthz|readyz)$' to " + (
        "SECURE_REDIRECT_EXEMPT"
    )
    # A new client: SecurityMiddleware reads its settings when made.
    assert Client().get(P + "healthz").status_code == 301
    settings.SECURE_REDIRECT_EXEMPT = [r"^ops/queues/(healthz|readyz)$"]
    assert check_urls() == []
    client = Client()
    assert client.get(P + "healthz").status_code == 200
    assert client.get(P + "readyz").status_code == 200
    assert client.get(P).status_code == 301


def test_checks_say_what_a_host_must_add(settings: Any) -> None:
    """A missing middleware, template setting or URL include is an error
    naming exactly what to add."""
    assert check_middleware() == check_templates() == check_urls() == []
    assert check_channel_layer() == []
    settings.MIDDLEWARE = [
        m for m in settings.MIDDLEWARE if "RedisUnavailable" not in m
    ]
    [error] = check_middleware()
    assert error.id == "bullpen.E010"
    assert "'dashboard.console.middleware.RedisUnavailableMiddleware'" in error.hint
    settings.CHANNEL_LAYERS = {}
    [warning] = check_channel_layer()
    assert warning.id == "bullpen.W002" and "CHANNEL_LAYERS" in warning.hint
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "APP_DIRS": False}]
    assert [e.id for e in check_templates()] == ["bullpen.E011"]
    settings.ROOT_URLCONF = "tests.dashboard.test_mounted"
    errors = check_urls()
    assert [e.id for e in errors] == ["bullpen.E012"]
    assert isinstance(errors[0], Error)
    assert 'include("dashboard.urls")' in str(errors[0].hint)
    # The middleware of a dashboard the URLconf left out breaks nothing.
    response = Client().get("/")
    assert response.status_code == 404
    assert "Content-Security-Policy" not in response


def test_a_host_must_list_the_throttled_login_backend(settings: Any) -> None:
    """Without Bullpen's backend in AUTHENTICATION_BACKENDS (Django's default
    lists only ModelBackend), or with ModelBackend before it, the dashboard's
    login would check passwords unthrottled: an error naming the backend."""
    from tests.hostproject import settings as host

    settings.AUTHENTICATION_BACKENDS = host.AUTHENTICATION_BACKENDS
    assert check_login_backend() == []
    model = "django.contrib.auth.backends.ModelBackend"
    for backends in ([model], [], [model, *host.AUTHENTICATION_BACKENDS]):
        settings.AUTHENTICATION_BACKENDS = backends
        [error] = check_login_backend()
        assert error.id == "bullpen.E013"
        assert "'dashboard.console.login_throttle.ThrottledModelBackend'" in error.hint


def test_the_login_under_the_prefix_is_throttled(mounted: str, settings: Any) -> None:
    """With the host's settings the dashboard's login under the prefix counts
    failures and refuses the right password past the limit (429)."""
    from tests.hostproject import settings as host

    settings.AUTHENTICATION_BACKENDS = host.AUTHENTICATION_BACKENDS
    settings.BULLPEN_LOGIN_MAX_FAILURES = 2
    User.objects.create_user("ops", password="pw-right-one")
    client = Client()
    for _ in range(2):
        wrong = client.post(P + "login/", {"username": "ops", "password": "x"})
        assert wrong.status_code == 200
    right = client.post(P + "login/", {"username": "ops", "password": "pw-right-one"})
    assert right.status_code == 429 and "Too many failed logins" in right.text


#: A URLconf without the dashboard (for bullpen.E012).
urlpatterns: list[object] = []


def test_host_settings_pass_every_check() -> None:
    """The host project's settings, which set no BULLPEN_* setting at all,
    pass `manage.py check` (Django's and Bullpen's)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.hostproject.settings",
        "REDIS_URL": "redis://127.0.0.1:1/0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "django", "check", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_a_hosts_login_required_middleware_leaves_the_dashboard_alone(
    mounted: str, settings: Any, qname: str
) -> None:
    """With Django's LoginRequiredMiddleware in the host, anonymous users of
    the dashboard still go to its own login page, and the probes, /metrics
    and the API (tokens) answer without a session; the host's pages go to
    the host's LOGIN_URL."""
    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE,
        "django.contrib.auth.middleware.LoginRequiredMiddleware",
    ]
    client = Client()
    assert client.get("/")["Location"] == "/accounts/login/?next=/"
    page = client.get(P + "search/")
    assert page["Location"] == P + "login/?next=/ops/queues/search/"
    assert client.get(P + "login/").status_code == 200
    for path in ["healthz", "readyz", "metrics", "api/v1/openapi.json"]:
        assert client.get(P + path).status_code == 200, path
    _, token = ApiToken.issue("host", "*", True, True)
    listed = client.get(P + "api/v1/queues", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert listed.status_code == 200
