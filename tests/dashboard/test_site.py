"""The standalone site around the two apps (issue 23): its own error pages
(templates/site/), JSON errors under /api/, and what a host project written
before the split is told by `manage.py check` and at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from dashboard import errors
from tests.dashboard.helpers import django_process

pytestmark = pytest.mark.django_db


def test_an_address_no_app_serves_is_the_sites_404_page(dashboard_redis: str) -> None:
    """The site's own page (its layout and stylesheet), not an app's and not
    Django's plain one; under /api/ the API's JSON."""
    response = Client().get("/no/such/page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "<title>Not found · Bullpen</title>" in html and 'id="not-found"' in html
    assert "/static/site.css" in html
    api = Client().get("/api/v2/anything")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


def test_the_sites_500_page_needs_no_context(rf: Any) -> None:
    """handler500 renders templates/site/500.html with nothing but the request
    (Django passes no context), and JSON under /api/."""
    page = errors.handler500(rf.get("/queues/"))
    assert page.status_code == 500 and b'id="server-error"' in page.content
    api = errors.handler500(rf.get("/api/v1/queues"))
    assert api.status_code == 500 and api["Content-Type"] == "application/json"


def test_a_host_listing_the_old_app_name_is_told_what_to_change(tmp_path: Path) -> None:
    """INSTALLED_APPS with "dashboard" (the operator app's name before the
    split): `manage.py check` fails with bullpen.E014, whose hint is the exact
    replacement; with "dashboard.console" the same host checks clean."""
    (tmp_path / "old_host.py").write_text(
        "from tests.hostproject.settings import *  # noqa: F403\n"
        "INSTALLED_APPS = [\n"
        '    "dashboard" if app == "dashboard.console" else app\n'
        "    for app in INSTALLED_APPS  # noqa: F405\n"
        "]\n"
    )
    check = (
        "import django; django.setup()\n"
        "from django.core.management import call_command; call_command('check')"
    )
    old = django_process(check, "old_host", cwd=tmp_path, path=(tmp_path,))
    assert old.returncode != 0
    assert "bullpen.E014" in old.stderr
    assert (
        'Replace "dashboard" with "dashboard.console" in INSTALLED_APPS' in old.stderr
    )
    new = django_process(check, "tests.hostproject.settings", cwd=tmp_path)
    assert new.returncode == 0, new.stderr


def test_websocket_urls_alone_still_sets_the_server_up_with_a_warning(
    tmp_path: Path,
) -> None:
    """An asgi.py written before the split calls only websocket_urls(): it
    gets a DeprecationWarning naming prepare(); after prepare() none."""
    code = (
        "import django, warnings; django.setup()\n"
        "warnings.simplefilter('error')\n"
        "from dashboard import routing\n"
        "{body}\n"
    )
    old = django_process(
        code.format(body="routing.websocket_urls('ops/queues/')"),
        "tests.hostproject.settings",
        cwd=tmp_path,
    )
    assert old.returncode != 0
    assert (
        "DeprecationWarning" in old.stderr
        and "dashboard.routing.prepare()" in old.stderr
    )
    routes = django_process(
        code.format(
            body="routing._prepared.set()\n"
            "print(len(routing.websocket_urls('ops/queues/')))"
        ),
        "tests.hostproject.settings",
        cwd=tmp_path,
    )
    assert routes.returncode == 0 and routes.stdout.strip() == "1", routes.stderr
