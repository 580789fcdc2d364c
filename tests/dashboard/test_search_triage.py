"""Job search (by id at once; bounded, resumable scans with filters) and
failure triage (groups by normalised reason, retry-the-group), both bounded."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from django.test import Client
from django.urls import reverse

from dashboard.console.models import AuditEntry
from dashboard.console.reads.scan import normalise_reason, parse_path, signature
from queues import Queue
from tests.dashboard.helpers import hx_post, job_url, run_jobs

pytestmark = pytest.mark.django_db


def _rows(html: str) -> list[str]:
    return [p.split('"')[0].rsplit(":", 1)[1] for p in html.split('<tr data-job="')[1:]]


def test_find_by_id_goes_straight_to_the_job(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """One hit redirects; the same id in two queues lists both; none says so."""
    a, b = Queue(qname + "a", dashboard_redis), Queue(qname + "b", dashboard_redis)
    only = a.add("x", {}, job_id="only-here").id
    response = admin_client.get("/search/", {"job_id": only})
    assert response.status_code == 302 and response["Location"] == job_url(a, only)
    a.add("x", {}, job_id="twice")
    b.add("x", {}, job_id="twice")
    html = admin_client.get("/search/", {"job_id": "twice"}).content.decode()
    assert job_url(a, "twice") in html and job_url(b, "twice") in html
    html = admin_client.get("/search/", {"job_id": "ghost"}).content.decode()
    assert "No job with id" in html
    # Restricted to one queue.
    html = admin_client.get("/search/", {"job_id": "twice", "queue": f"bull:{qname}b"})
    assert html["Location"] == job_url(b, "twice")


def test_scan_is_bounded_and_resumable(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """A scan reads at most BULLPEN_SCAN_CAP jobs per request and offers a
    continue link that resumes where it stopped, to the end of the state."""
    settings.BULLPEN_SCAN_CAP = 100
    settings.BULLPEN_PAGE_SIZE = 1000
    q = Queue(qname, dashboard_redis)
    q.add_bulk(
        [
            {"name": "hit" if i % 50 == 0 else "miss", "data": {"i": i}}
            for i in range(350)
        ]
    )
    stats = redis.Redis.from_url(dashboard_redis, decode_responses=True)
    params: dict[str, Any] = {
        "queue": f"bull:{qname}",
        "state": "waiting",
        "name": "hit",
    }
    found: list[str] = []
    requests = 0
    while True:
        stats.config_resetstat()
        html = admin_client.get("/search/", params).content.decode()
        requests += 1
        assert stats.info("commandstats")["cmdstat_hkeys"]["calls"] <= 100
        found += _rows(html)
        if "Continue from job" not in html:
            assert "end of waiting reached" in html
            break
        cursor = html.split("cursor=")[1].split('"')[0].split("&")[0]
        assert int(cursor) == requests * 100
        params["cursor"] = cursor
    assert requests == 4
    assert sorted(found, key=int) == [str(i + 1) for i in range(0, 350, 50)]


def test_scan_stops_at_a_page_of_matches(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """Once a page of matches is found the scan stops and resumes after the last."""
    settings.BULLPEN_PAGE_SIZE = 5
    q = Queue(qname, dashboard_redis)
    q.add_bulk([{"name": "n", "data": {"i": i}} for i in range(20)])
    html = admin_client.get(
        "/search/", {"queue": f"bull:{qname}", "state": "waiting"}
    ).content.decode()
    assert _rows(html) == ["20", "19", "18", "17", "16"]
    assert "cursor=5" in html


def test_filters_by_substring_and_json_path(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """`text` matches the data as shown; `path` (with an optional value) matches
    a JSON path; a bad path is reported, not raised."""
    q = Queue(qname, dashboard_redis)
    q.add("a", {"user": {"id": 7, "name": "Ann"}, "items": [{"sku": "X1"}]})
    q.add("b", {"user": {"id": 8, "name": "Bob"}, "items": []})
    q.add("c", {"note": "ann's job"})
    base = {"queue": f"bull:{qname}", "state": "waiting"}

    def names(**extra: str) -> list[str]:
        html = admin_client.get("/search/", {**base, **extra}).content.decode()
        return sorted(re.findall(r'<span class="clip" title="[^"]*">([^<]*)<', html))

    assert names(text="ANN") == ["a", "c"]
    assert names(path="$.user.id") == ["a", "b"]
    assert names(path="user.id", value="8") == ["b"]
    assert names(path="items[0].sku", value="X1") == ["a"]
    assert names(path="$.user.name", value="Ann") == ["a"]
    html = admin_client.get("/search/", {**base, "path": "a..b"}).content.decode()
    assert "cannot read JSON path" in html
    html = admin_client.get("/search/", {"state": "waiting"}).content.decode()
    assert "choose a queue" in html


def test_parse_path_and_normalise_reason() -> None:
    """Paths accept $-prefixed dots and brackets; reasons lose their specifics."""
    assert parse_path("$.a.b[0].c") == ["a", "b", 0, "c"]
    assert parse_path("a.0") == ["a", "0"]
    a = normalise_reason(
        "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "
        "23.65 GiB total capacity)\nTraceback..."
    )
    b = normalise_reason(
        "CUDA out of memory. Tried to allocate 512.00 MiB (GPU 1; "
        "23.65 GiB total capacity)"
    )
    assert a.startswith("CUDA out of memory. Tried to allocate <n> GiB (GPU <n>;")
    assert signature(a) != signature(b)  # GiB vs MiB stay apart
    assert (
        normalise_reason(
            "job 1f0e2d3c-aaaa-bbbb-cccc-0123456789ab timed out after 30000 ms"
        )
        == "job <uuid> timed out after <n> ms"
    )
    assert normalise_reason("key 'user:42' missing") == normalise_reason(
        'key "order:7" missing'
    )
    assert normalise_reason(None) == "(no reason)"


def test_triage_groups_failures_and_retries_a_group(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Failures group by normalised reason, largest first; retry-the-group
    retries only jobs still failed for that reason, in batches, audited."""
    q = Queue(qname, dashboard_redis)
    oom = run_jobs(q, 3, "failed", value="CUDA out of memory. Tried to allocate 2 GiB")
    oom += run_jobs(q, 2, "failed", value="CUDA out of memory. Tried to allocate 4 GiB")
    other = run_jobs(q, 2, "failed", value="ValueError: bad prompt 'x'")
    html = admin_client.get(
        reverse("bullpen:triage", args=["bull", qname])
    ).content.decode()
    assert html.index(
        "CUDA out of memory. Tried to allocate &lt;n&gt; GiB"
    ) < html.index("ValueError: bad prompt &lt;str&gt;")
    assert ">5<" in html and ">2<" in html
    sig = signature(normalise_reason("CUDA out of memory. Tried to allocate 2 GiB"))
    assert f'value="{sig}"' in html
    url = reverse("bullpen:triage-action", args=["bull", qname, "retry-group"])
    response = hx_post(
        admin_client,
        url,
        {"signature": sig, "ids": ",".join(oom + other[:1] + ["ghost"])},
    )
    assert response.status_code == 200
    assert all(q.get_job_state(i).value == "waiting" for i in oom)
    assert all(q.get_job_state(i).value == "failed" for i in other)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome, entry.target) == (
        "triage.retry_group",
        "ok",
        f"bull:{qname}",
    )
    assert entry.detail.startswith("retried 5 job(s)") and "skipped 2" in entry.detail
    assert (
        hx_post(admin_client, url, {"signature": "zz", "ids": "1"}).status_code == 400
    )


def test_triage_window_is_bounded(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """Triage reads at most BULLPEN_SCAN_CAP failed jobs a request, then offers more."""
    settings.BULLPEN_SCAN_CAP = 50
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 120, "failed", value="boom 1")
    url = reverse("bullpen:triage", args=["bull", qname])
    html = admin_client.get(url).content.decode()
    assert "Failed jobs 1–50 of" in html and 'href="?cursor=50"' in html
    assert ">50<" in html
    html = admin_client.get(url, {"cursor": 100}).content.decode()
    assert "Failed jobs 101–120" in html and ">20<" in html
    assert "back to newest" in html
    index = admin_client.get("/triage/").content.decode()
    assert f"bull:{qname}" in index and ">120<" in index


def test_viewer_cannot_retry_a_group(
    dashboard_redis: str, viewer_client: Client, qname: str
) -> None:
    """Retry-the-group needs operate; the viewer sees groups without the button."""
    q = Queue(qname, dashboard_redis)
    ids = run_jobs(q, 2, "failed", value="boom")
    html = viewer_client.get(
        reverse("bullpen:triage", args=["bull", qname])
    ).content.decode()
    assert "Retry 2" not in html
    url = reverse("bullpen:triage-action", args=["bull", qname, "retry-group"])
    sig = signature(normalise_reason("boom"))
    assert (
        hx_post(
            viewer_client, url, {"signature": sig, "ids": ",".join(ids)}
        ).status_code
        == 403
    )
    assert q.get_counts("failed")["failed"] == 2


def test_search_reports_invalid_input(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """An unknown queue or state is reported, not scanned."""
    html = admin_client.get("/search/", {"queue": "bull:nope", "state": "waiting"})
    assert b"queue:" in html.content and b"flash error" in html.content
