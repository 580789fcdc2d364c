"""The standalone site around the two apps (issue 23): its own error pages
(templates/site/), JSON errors under /api/, and what a host project written
before the split is told by `manage.py check` and at start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from dashboard import errors

ROOT = Path(__file__).resolve().parents[2]

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


def _django(
    code: str, settings_module: str, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "BULLPEN_"))
    }
    env["DJANGO_SETTINGS_MODULE"] = settings_module
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


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
    old = _django(check, "old_host", tmp_path)
    assert old.returncode != 0
    assert "bullpen.E014" in old.stderr
    assert (
        'Replace "dashboard" with "dashboard.console" in INSTALLED_APPS' in old.stderr
    )
    new = _django(check, "tests.hostproject.settings", tmp_path)
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
    old = _django(
        code.format(body="routing.websocket_urls('ops/queues/')"),
        "tests.hostproject.settings",
        tmp_path,
    )
    assert old.returncode != 0
    assert (
        "DeprecationWarning" in old.stderr
        and "dashboard.routing.prepare()" in old.stderr
    )
    routes = _django(
        code.format(
            body="routing._prepared.set()\n"
            "print(len(routing.websocket_urls('ops/queues/')))"
        ),
        "tests.hostproject.settings",
        tmp_path,
    )
    assert routes.returncode == 0 and routes.stdout.strip() == "1", routes.stderr
