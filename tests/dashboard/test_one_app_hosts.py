"""A host project may mount one of the two apps alone (issue 23): the
operator app without the API (its job page simply has no webhook panel), or
the API without the pages. Each host is a real Django project of its own,
run in a process of its own (INSTALLED_APPS cannot change inside this one):
`manage.py check` passes, and its pages or API answer on a real Redis."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from django.test import Client

from dashboard.api import store
from dashboard.api.webhooks import deliveries
from queues import Queue
from tests.dashboard.helpers import django_process

CONSOLE_ONLY = """
from tests.hostproject.settings import *  # noqa: F403
INSTALLED_APPS = [a for a in INSTALLED_APPS if a != "dashboard.api"]  # noqa: F405
ROOT_URLCONF = "console_only_urls"
"""
CONSOLE_URLS = """
from django.urls import include, path
urlpatterns = [path("ops/", include("dashboard.console.urls"))]
"""
API_ONLY = """
from tests.hostproject.settings import *  # noqa: F403
INSTALLED_APPS = [a for a in INSTALLED_APPS if a != "dashboard.console"]  # noqa: F405
MIDDLEWARE = [m for m in MIDDLEWARE if not m.startswith("dashboard.")]  # noqa: F405
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
ROOT_URLCONF = "api_only_urls"
"""
API_URLS = """
from django.urls import include, path
urlpatterns = [path("producers/api/v1/", include("dashboard.api.urls"))]
"""

CONSOLE_WALK = """
import django, json, sys
django.setup()
from django.core.management import call_command
call_command("check", fail_level="ERROR")
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
from django.test import Client
client = Client()
client.force_login(User.objects.create_superuser("root", "", "pw"))
out = {}
for url in sys.argv[1:]:
    response = client.get(url)
    out[url] = [response.status_code, response.content.decode()]
print(json.dumps(out))
"""

API_WALK = """
import django, json, sys
django.setup()
from django.core.management import call_command
call_command("check", fail_level="ERROR")
call_command("migrate", verbosity=0)
from dashboard.api.models import ApiToken
from django.test import Client
_, plain = ApiToken.issue("t", "*", can_read=True, can_write=True)
client = Client(HTTP_AUTHORIZATION=f"Bearer {plain}")
added = client.post(
    "/producers/api/v1/queues/" + sys.argv[1] + "/jobs",
    data=json.dumps({"name": "render", "data": {"n": 1}}),
    content_type="application/json",
)
listed = client.get("/producers/api/v1/queues")
print(json.dumps([added.status_code, added.json(), listed.status_code, listed.json()]))
"""


def run_host(
    tmp_path: Path,
    settings: str,
    urls: tuple[str, str],
    code: str,
    *args: str,
    redis_url: str,
) -> subprocess.CompletedProcess[str]:
    """Write the host's settings and URLconf to `tmp_path` and run `code` there."""
    (tmp_path / "host_settings.py").write_text(settings)
    (tmp_path / f"{urls[0]}.py").write_text(urls[1])
    return django_process(
        code,
        "host_settings",
        *args,
        cwd=tmp_path,
        path=(tmp_path,),
        REDIS_URL=redis_url,
        HOST_DB_PATH=str(tmp_path / "db.sqlite3"),
    )


@pytest.mark.django_db
def test_the_operator_app_alone(
    tmp_path: Path, dashboard_redis: str, qname: str, operator_client: Client
) -> None:
    """Without the API app: checks pass, the overview and a job page answer,
    and the job page has no webhook deliveries panel, where the standalone
    site (both apps) shows the job's delivery in it."""
    redis_url = dashboard_redis
    q = Queue(qname, redis_url)
    job = q.add("render", {"n": 1})
    attempt = {"event": "completed", "attempt": 1, "outcome": "delivered"}
    deliveries.record(
        store.client(), store.keys(), store.queue_key(qname), job.id, attempt
    )
    both = operator_client.get(f"/queues/bull/{qname}/jobs/{job.id}/")
    assert both.status_code == 200 and b"Webhook deliveries" in both.content
    job_url = f"/ops/queues/bull/{qname}/jobs/{job.id}/"
    done = run_host(
        tmp_path,
        CONSOLE_ONLY,
        ("console_only_urls", CONSOLE_URLS),
        CONSOLE_WALK,
        "/ops/",
        job_url,
        redis_url=redis_url,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    pages = json.loads(done.stdout.strip().splitlines()[-1])
    assert pages["/ops/"][0] == 200 and qname in pages["/ops/"][1]
    status, html = pages[job_url]
    assert status == 200 and f"<title>Job {job.id} · bull:{qname}" in html
    assert "Webhook deliveries" not in html


def test_the_producer_api_alone(tmp_path: Path, redis_url: str, qname: str) -> None:
    """Without the operator app (and none of its middleware or login
    backend): checks pass, a token adds a job under the host's own prefix
    and lists the queue."""
    done = run_host(
        tmp_path,
        API_ONLY,
        ("api_only_urls", API_URLS),
        API_WALK,
        qname,
        redis_url=redis_url,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    added_status, added, listed_status, listed = json.loads(
        done.stdout.strip().splitlines()[-1]
    )
    assert added_status == 201, added
    assert Queue(qname, redis_url).get_job(added["id"]) is not None
    assert listed_status == 200
    assert qname in json.dumps(listed)
