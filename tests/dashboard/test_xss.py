"""Job data, names, ids, reasons and logs are untrusted: they render inert
everywhere (lists, job page, search, triage, overview)."""

from __future__ import annotations

import html as html_lib
import json

import pytest
from django.test import Client
from django.urls import reverse

from queues import Queue
from tests.dashboard.helpers import HX, job_url, queue_url, run_jobs

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
ATTR = '"><img src=x onerror=alert(2)>'


def _assert_inert(html: str) -> None:
    body = html.split("<body", 1)[-1]
    for raw in ("<script>alert", "<img src=x", '"><img'):
        assert raw not in body, raw
    # Every <script> tag left is one of ours, with a src.
    for tag in body.split("<script")[1:]:
        assert tag.lstrip().startswith("src="), tag[:80]


@pytest.fixture
def evil(dashboard_redis: str, qname: str) -> tuple[Queue, str]:
    """A failed job whose name, data, reason, trace, result and log attack the page."""
    q = Queue(qname, dashboard_redis)
    [job_id] = run_jobs(
        q,
        1,
        "failed",
        name=f"{SCRIPT}{ATTR}",
        value=f"{ATTR} {SCRIPT}",
        data={"html": SCRIPT, "attr": ATTR, ATTR: [SCRIPT]},
        fields=["stacktrace", json.dumps([SCRIPT + ATTR])],
    )
    q.get_job(job_id).log(SCRIPT + ATTR)
    return q, job_id


def test_list_rows_are_inert(evil: tuple[Queue, str], admin_client: Client) -> None:
    """The queue page, its tabs and the list fragment escape every field."""
    q, job_id = evil
    for state in ("latest", "failed"):
        html = admin_client.get(queue_url(q), {"state": state}).content.decode()
        _assert_inert(html)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in html
    fragment = admin_client.get(
        reverse("bullpen:queue-jobs", args=[q.prefix, q.name]),
        {"state": "failed"},
        **HX,
    ).content.decode()
    _assert_inert(fragment)


def test_job_page_is_inert(evil: tuple[Queue, str], admin_client: Client) -> None:
    """Data, name, failed reason, stack trace and logs are escaped on the job page."""
    q, job_id = evil
    for url in (job_url(q, job_id), job_url(q, job_id) + "?full=1"):
        html = admin_client.get(url).content.decode()
        _assert_inert(html)
        assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5


def test_search_and_triage_are_inert(
    evil: tuple[Queue, str], admin_client: Client
) -> None:
    """Scan results and failure groups escape what they show."""
    q, job_id = evil
    html = admin_client.get(
        "/search/", {"queue": f"bull:{q.name}", "state": "failed", "text": "script"}
    ).content.decode()
    assert f'data-job="bull:{q.name}:{job_id}"' in html
    _assert_inert(html)
    html = admin_client.get(
        reverse("bullpen:triage", args=["bull", q.name])
    ).content.decode()
    _assert_inert(html)
    assert "&lt;script&gt;" in html


def test_hostile_job_id_and_queue_name(
    dashboard_redis: str, admin_client: Client
) -> None:
    """Ids and queue names are escaped in links, live attributes and the
    job fragment's data-live-job key (no JavaScript filter to escape into)."""
    name = "q<b>\"'x"
    q = Queue(name, dashboard_redis)
    job = q.add("x", {}, job_id="id'\"<i>")
    html = admin_client.get("/").content.decode()
    _assert_inert(html)
    assert "q&lt;b&gt;&quot;&#x27;x" in html and "<b>" not in html.split("<body")[1]
    page = admin_client.get(job_url(q, job.id)).content.decode()
    assert "<i>" not in page.split("<body")[1] and "<b>" not in page.split("<body")[1]
    key = page.split('data-live-job="')[1].split('"')[0]
    assert html_lib.unescape(key) == f"bull:{name}:{job.id}"
    assert "bullpen:queue-event[" not in page
    live = page.split('data-live="')[1].split('"')[0]
    assert json.loads(html_lib.unescape(live))["jobs"] == [f"bull:{name}:{job.id}"]


def test_redaction_hook_hides_sensitive_keys(
    dashboard_redis: str,
    admin_client: Client,
    settings,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    """With BULLPEN_REDACT set, secrets never reach lists, the job page or
    search (a search for a secret's value finds nothing)."""
    settings.BULLPEN_REDACT = "dashboard.shared.redaction.redact_sensitive_keys"
    q = Queue(qname, dashboard_redis)
    job = q.add(
        "x",
        {"user": "ann", "api_token": "sk-SECRET", "nested": [{"password": "hunter2"}]},
    )
    for url in (queue_url(q), job_url(q, job.id)):
        html = admin_client.get(url).content.decode()
        assert "sk-SECRET" not in html and "hunter2" not in html
        assert "[redacted]" in html and "ann" in html
    html = admin_client.get(
        "/search/", {"queue": f"bull:{qname}", "state": "waiting", "text": "hunter2"}
    ).content.decode()
    assert "0 matches" in html
    settings.BULLPEN_REDACT = "tests.dashboard.test_xss.broken_hook"
    html = admin_client.get(job_url(q, job.id)).content.decode()
    assert "sk-SECRET" not in html and "[redacted]" in html


def broken_hook(data: object) -> object:
    """A redaction hook that fails: the data must stay hidden."""
    raise RuntimeError("bug")
