"""Login, the view/operate/scale permissions through groups, 403s and CSRF."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from django.urls import reverse

from dashboard.console.models import AuditEntry
from queues import Queue
from tests.dashboard.conftest import client_for, user_in
from tests.dashboard.helpers import HX, hx_post, job_url, queue_url, run_jobs

pytestmark = pytest.mark.django_db


def test_migration_creates_the_three_groups() -> None:
    """viewer ⊂ operator ⊂ scaler, holding the dashboard's custom permissions."""
    perms = {
        g.name: sorted(g.permissions.values_list("codename", flat=True))
        for g in Group.objects.all()
    }
    assert perms == {
        "viewer": ["view_queues"],
        "operator": ["operate_queues", "view_queues"],
        "scaler": ["operate_queues", "scale_workers", "view_queues"],
    }


def _pages(q: Queue, job_id: str) -> list[str]:
    return [
        "/",
        "/fragments/queues/",
        queue_url(q),
        reverse("bullpen:queue-jobs", args=[q.prefix, q.name]),
        job_url(q, job_id),
        reverse("bullpen:job-detail", args=[q.prefix, q.name, job_id]),
        "/search/",
        "/triage/",
        reverse("bullpen:triage", args=[q.prefix, q.name]),
    ]


def test_anonymous_is_redirected_to_our_login_page(
    dashboard_redis: str, qname: str
) -> None:
    """Every page and fragment sends an anonymous user to /login/?next=..."""
    q = Queue(qname, dashboard_redis)
    job_id = q.add("x", {}).id
    for url in _pages(q, job_id):
        response = Client().get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/login/?next="), url


def test_anonymous_action_is_redirected_and_changes_nothing(
    dashboard_redis: str, qname: str
) -> None:
    """A POST without a session never reaches the queue."""
    q = Queue(qname, dashboard_redis)
    response = Client().post(queue_url(q, "pause"))
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    assert not q.is_paused()


def test_login_page_logs_in_and_logout_is_a_post(
    dashboard_redis: str, qname: str
) -> None:
    """Our login page (not /admin) signs a user in and returns to `next`."""
    user_in("viewer", "vera")
    client = Client()
    page = client.get("/login/?next=/search/")
    assert page.status_code == 200
    assert b'name="password"' in page.content
    bad = client.post("/login/", {"username": "vera", "password": "nope"})
    assert b"did not match" in bad.content
    good = client.post(
        "/login/", {"username": "vera", "password": "pw", "next": "/search/"}
    )
    assert good.status_code == 302 and good["Location"] == "/search/"
    assert client.get("/").status_code == 200
    assert client.get("/logout/").status_code == 405
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_user_without_view_permission_gets_403(
    dashboard_redis: str, nobody_client: Client, qname: str
) -> None:
    """Logged in but in no group: every page answers 403."""
    q = Queue(qname, dashboard_redis)
    job_id = q.add("x", {}).id
    for url in _pages(q, job_id):
        assert nobody_client.get(url).status_code == 403, url


def test_view_permission_given_directly_works(dashboard_redis: str) -> None:
    """Permissions work when given to a user, not only through a group."""
    user = User.objects.create_user("direct", password="x")
    user.user_permissions.add(Permission.objects.get(codename="view_queues"))
    assert client_for(user).get("/").status_code == 200


def test_viewer_sees_pages_without_action_controls(
    dashboard_redis: str, viewer_client: Client, qname: str
) -> None:
    """A viewer reads the queue and job pages but is offered no action."""
    q = Queue(qname, dashboard_redis)
    [job_id] = run_jobs(q, 1, "failed")
    queue_page = viewer_client.get(queue_url(q)).content.decode()
    assert "/actions/" not in queue_page
    job_page = viewer_client.get(job_url(q, job_id)).content.decode()
    assert "/actions/" not in job_page
    assert "needs the operate permission" in job_page


def test_viewer_cannot_retry(
    dashboard_redis: str, viewer_client: Client, qname: str
) -> None:
    """A viewer's retry is refused (403, audited as denied); the job stays failed."""
    q = Queue(qname, dashboard_redis)
    [job_id] = run_jobs(q, 1, "failed")
    response = hx_post(viewer_client, job_url(q, job_id, "retry"))
    assert response.status_code == 403
    assert b"operate_queues" in response.content
    assert q.get_job_state(job_id).value == "failed"
    entry = AuditEntry.objects.get()
    assert (entry.username, entry.action, entry.outcome, entry.target) == (
        "u-viewer",
        "job.retry",
        "denied",
        f"bull:{qname}:{job_id}",
    )


def test_operator_can_retry_but_cannot_scale(
    dashboard_redis: str, operator_client: Client, qname: str
) -> None:
    """operate_queues covers job actions; concurrency and rate limits need scale."""
    q = Queue(qname, dashboard_redis)
    [job_id] = run_jobs(q, 1, "failed")
    assert hx_post(operator_client, job_url(q, job_id, "retry")).status_code == 200
    assert q.get_job_state(job_id).value == "waiting"
    for verb, data in (
        ("concurrency", {"concurrency": 3}),
        ("rate-limit", {"max": 5, "duration_ms": 1000}),
    ):
        response = hx_post(operator_client, queue_url(q, verb), data)
        assert response.status_code == 403, verb
    assert q.get_meta() == {} or "concurrency" not in q.get_meta()
    assert list(AuditEntry.objects.order_by("id").values_list("action", "outcome")) == [
        ("job.retry", "ok"),
        ("queue.concurrency", "denied"),
        ("queue.rate_limit", "denied"),
    ]
    page = operator_client.get(queue_url(q)).content.decode()
    assert "global concurrency" not in page


def test_scaler_and_superuser_can_scale(
    dashboard_redis: str, scaler_client: Client, admin_client: Client, qname: str
) -> None:
    """scale_workers (or superuser) sets global concurrency and rate limits."""
    q = Queue(qname, dashboard_redis)
    q.add("x", {})
    assert (
        hx_post(
            scaler_client, queue_url(q, "concurrency"), {"concurrency": 4}
        ).status_code
        == 200
    )
    assert q.get_meta()["concurrency"] == "4"
    assert (
        hx_post(
            admin_client, queue_url(q, "rate-limit"), {"max": 10, "duration_ms": 1000}
        ).status_code
        == 200
    )
    assert (q.get_meta()["max"], q.get_meta()["duration"]) == ("10", "1000")
    assert "global concurrency" in scaler_client.get(queue_url(q)).content.decode()


def test_csrf_is_enforced_on_actions(dashboard_redis: str, qname: str) -> None:
    """A POST without the CSRF token is refused before the action runs; with
    the token htmx sends (X-CSRFToken from the page) it succeeds."""
    q = Queue(qname, dashboard_redis)
    [job_id] = run_jobs(q, 1, "failed")
    client = client_for(user_in("operator"), enforce_csrf_checks=True)
    refused = client.post(job_url(q, job_id, "retry"), **HX)
    assert refused.status_code == 403
    assert b"security token" in refused.content and b"<html" not in refused.content
    assert q.get_job_state(job_id).value == "failed"
    assert not AuditEntry.objects.exists()
    page = client.get(job_url(q, job_id)).content.decode()
    token = page.split('"X-CSRFToken": "')[1].split('"')[0]
    accepted = client.post(job_url(q, job_id, "retry"), HTTP_X_CSRFTOKEN=token, **HX)
    assert accepted.status_code == 200
    assert q.get_job_state(job_id).value == "waiting"
    # The plain form path carries the token as a field.
    assert 'name="csrfmiddlewaretoken"' in page


def test_actions_need_post(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """GET on an action URL is 405; an unknown verb is 404."""
    q = Queue(qname, dashboard_redis)
    job_id = q.add("x", {}).id
    assert admin_client.get(queue_url(q, "pause")).status_code == 405
    assert admin_client.get(job_url(q, job_id, "retry")).status_code == 405
    assert admin_client.post(queue_url(q, "explode")).status_code == 404
    assert admin_client.post(job_url(q, job_id, "explode")).status_code == 404
    assert not q.is_paused()


def test_htmx_request_without_session_redirects_the_whole_page(
    dashboard_redis: str, qname: str
) -> None:
    """An expired session's htmx request gets HX-Redirect to the login page,
    returning to the page the browser was on."""
    q = Queue(qname, dashboard_redis)
    response = Client().get(
        reverse("bullpen:queue-jobs", args=["bull", qname]),
        HTTP_HX_CURRENT_URL=f"http://testserver{queue_url(q)}",
        **HX,
    )
    assert response.status_code == 200
    assert response["HX-Redirect"].startswith("/login/?next=/queues/bull/")
    response = Client().post(queue_url(q, "pause"), **HX)
    assert response["HX-Redirect"].startswith("/login/")


def test_pages_have_an_icon_and_favicon_ico_points_to_it(dashboard_redis: str) -> None:
    """Pages link the icon; /favicon.ico (asked for by browsers on pages
    without the link, such as the admin's) redirects to it without a login
    instead of logging a 404."""
    from pathlib import Path

    login = Client().get("/login/").content.decode()
    assert 'rel="icon" href="/static/dashboard/favicon.svg"' in login
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == "/static/dashboard/favicon.svg"
    from django.contrib.staticfiles import finders

    icon = finders.find("dashboard/favicon.svg")
    assert icon and Path(icon).read_text().startswith("<svg")
