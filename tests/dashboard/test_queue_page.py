"""The queue page: tabs with counts, paginated O(page) job lists, rows, fragments."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.test import Client
from django.urls import reverse

from dashboard.console.models import AuditEntry
from dashboard.console.views import job, queue
from queues import Queue
from queues.connection import sync_from_url
from tests.dashboard.helpers import (
    HX,
    beat,
    hx_post,
    job_url,
    make_active,
    queue_url,
    run_jobs,
)

pytestmark = pytest.mark.django_db


def _ids(html: str) -> list[str]:
    return [
        part.split('"')[0].rsplit(":", 1)[1]
        for part in html.split('<tr data-job="')[1:]
    ]


def test_tabs_show_counts_per_state_with_live_attributes(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Each state tab carries its count and the data-live-count key live.js updates."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 2, "failed")
    run_jobs(q, 1, "completed")
    make_active(q)
    q.add_bulk([{"name": "w", "data": {}} for _ in range(3)])
    q.add("p", {}, priority=2)
    q.add("d", {}, delay=60_000)
    html = admin_client.get(queue_url(q)).content.decode()
    for state, n in (
        ("active", 1),
        ("waiting", 3),
        ("prioritized", 1),
        ("delayed", 1),
        ("waiting-children", 0),
        ("completed", 1),
        ("failed", 2),
    ):
        assert f'data-live-count="bull:{qname}:{state}">{n}<' in html, state
    assert ">latest<span" in html
    assert f'data-live="{{&quot;queues&quot;: [&quot;bull:{qname}&quot;]}}"' in html
    # latest lists every state, with a live state badge per row
    assert len(_ids(html)) == 9
    assert f'data-live-state="bull:{qname}:' in html


def test_pages_newest_and_oldest_first(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """Pages of BULLPEN_PAGE_SIZE, newest first by default, oldest first on request."""
    settings.BULLPEN_PAGE_SIZE = 10
    q = Queue(qname, dashboard_redis)
    q.add_bulk([{"name": "w", "data": {"i": i}} for i in range(25)])
    url = queue_url(q)
    first = admin_client.get(url, {"state": "waiting"}).content.decode()
    assert _ids(first) == [str(i) for i in range(25, 15, -1)]
    assert "page 1 of 3" in first
    last = admin_client.get(url, {"state": "waiting", "page": 3}).content.decode()
    assert _ids(last) == ["5", "4", "3", "2", "1"]
    oldest = admin_client.get(
        url, {"state": "waiting", "order": "oldest"}
    ).content.decode()
    assert _ids(oldest)[:3] == ["1", "2", "3"]
    # Past the end clamps to the last page; junk page numbers read page 1.
    assert _ids(
        admin_client.get(url, {"state": "waiting", "page": 99}).content.decode()
    ) == ["5", "4", "3", "2", "1"]
    assert (
        _ids(admin_client.get(url, {"state": "waiting", "page": "x"}).content.decode())[
            0
        ]
        == "25"
    )


def test_a_page_reads_only_its_jobs(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """A page of a 3,000-job state reads PAGE_SIZE job hashes, whatever the page
    (in one capped read: HKEYS per job inside get_job_hashes)."""
    settings.BULLPEN_PAGE_SIZE = 20
    q = Queue(qname, dashboard_redis)
    for start in range(0, 3000, 500):
        q.add_bulk([{"name": "w", "data": {"i": i}} for i in range(start, start + 500)])
    stats = redis.Redis.from_url(dashboard_redis, decode_responses=True)
    for page in (1, 75, 150):
        stats.config_resetstat()
        response = admin_client.get(queue_url(q), {"state": "waiting", "page": page})
        assert len(_ids(response.content.decode())) == 20
        info = stats.info("commandstats")
        assert info["cmdstat_hkeys"]["calls"] == 20
        assert info["cmdstat_hgetall"]["calls"] == 1  # the meta hash
        assert info.get("cmdstat_lrange", {"calls": 0})["calls"] <= 3
        assert "cmdstat_keys" not in info and "cmdstat_smembers" not in info


def test_rows_show_job_fields_and_truncated_data(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """Rows carry id, name, progress bar (live attributes), attempts, times,
    duration, processed-by and a preview cut at BULLPEN_DATA_PREVIEW_CHARS."""
    settings.BULLPEN_DATA_PREVIEW_CHARS = 40
    q = Queue(qname, dashboard_redis)
    job_id = make_active(q, "render", {"prompt": "x" * 500})
    q.get_job(job_id).update_progress(42)
    html = admin_client.get(queue_url(q), {"state": "active"}).content.decode()
    key = f"bull:{qname}:{job_id}"
    assert f'data-live-progress="{key}"' in html
    assert 'data-bar-width="42.0"' in html or 'data-bar-width="42"' in html
    assert f'data-live-progress-text="{key}">42%<' in html
    assert ">render<" in html and "gpu-host-1" in html and "0 of 1" in html
    preview = html.split('<div class="preview mono" title="')[1].split('"')[0]
    assert preview.startswith("{&quot;prompt&quot;:&quot;xxx")
    assert preview.endswith("…") and preview.count("x") < 45
    assert " ms<" in html  # a running job's duration so far


def test_huge_job_fields_are_not_read_for_lists_or_the_job_page(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """A job holding 8 MB of data and a 100 KB failure reason: its row leaves
    both out (over 64 KiB) and its page the data (over 1 MiB), saying how
    large they are; "Load it all" loads them; search passes over it; nothing
    in Redis changes."""
    q = Queue(qname, dashboard_redis)
    [big] = run_jobs(
        q, 1, "failed", value="E" * 100_000, data={"blob": "x" * 8_000_000}
    )
    [small] = run_jobs(q, 1, "failed", value="boom", data={"prompt": "cat"})
    listing = admin_client.get(queue_url(q), {"state": "failed"})
    html = listing.content.decode()
    assert len(listing.content) < 100_000
    assert "(7.6 MiB, too large to show here)" in html
    assert "(97.7 KiB, too large to show here)" in html
    assert "&quot;prompt&quot;:&quot;cat&quot;" in html and ">boom<" in html

    page_url = reverse("bullpen:job", args=["bull", qname, big])
    page = admin_client.get(page_url)
    assert len(page.content) < 300_000
    text = page.content.decode()
    assert "Not loaded (7.6 MiB, too large to show here)" in text
    assert "E" * 100_000 in text  # under the page's 1 MiB cap
    whole = admin_client.get(page_url, {"full": "1"}).content.decode()
    assert "Not loaded" not in whole and "x" * 20_000 in whole

    found = admin_client.get(
        reverse("bullpen:search"),
        {"queue": f"bull:{qname}", "state": "failed", "text": "xxx"},
    ).content.decode()
    assert "0 matches" in found and "2 read; 1 with data too large to search" in found
    assert len(q.get_job(big).data["blob"]) == 8_000_000
    assert q.get_job(small) is not None
    # Actions other than duplicate act by id, without reading the payload.
    assert hx_post(admin_client, job_url(q, big, "retry")).status_code == 200
    assert q.get_job_state(big).value == "waiting"
    assert len(q.get_job(big).data["blob"]) == 8_000_000


def test_job_list_fragment_rerenders_on_queue_events(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """The fragment is the same list, wrapped to re-fetch on bullpen:queue-event."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 3, "failed")
    url = reverse("bullpen:queue-jobs", args=["bull", qname])
    html = admin_client.get(url, {"state": "failed"}, **HX).content.decode()
    assert html.startswith('<div id="job-list"')
    assert 'hx-trigger="bullpen:queue-event from:body throttle:1s' in html
    assert "<html" not in html
    assert len(_ids(html)) == 3
    page = admin_client.get(queue_url(q), {"state": "failed"}).content.decode()
    assert f'hx-get="{url}?state=failed&amp;order=newest&amp;page=1"' in page


def test_unknown_queue_prefix_or_tab_is_404(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Only configured prefixes and queues that exist are served; tabs are
    the known states."""
    assert admin_client.get(f"/queues/bullpen/{qname}/").status_code == 404
    assert admin_client.get(f"/queues/bull/{qname}/").status_code == 404
    Queue(qname, dashboard_redis).add("a", {})
    assert (
        admin_client.get(
            queue_url(Queue(qname, dashboard_redis)), {"state": "bogus"}
        ).status_code
        == 404
    )
    assert admin_client.get(f"/queues/bull/{qname}/").status_code == 200


def test_read_only_queue_offers_and_allows_no_action(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """BULLPEN_READ_ONLY_QUEUES hides the controls and refuses every action."""
    settings.BULLPEN_READ_ONLY_QUEUES = [f"bull:{qname}"]
    q = Queue(qname, dashboard_redis)
    [job_id] = run_jobs(q, 1, "failed")
    html = admin_client.get(queue_url(q)).content.decode()
    assert "is read-only here" in html and "/actions/" not in html
    assert hx_post(admin_client, queue_url(q, "pause")).status_code == 403
    assert (
        hx_post(
            admin_client,
            reverse("bullpen:job-action", args=["bull", qname, job_id, "retry"]),
        ).status_code
        == 403
    )
    assert not q.is_paused() and q.get_job_state(job_id).value == "failed"
    assert set(AuditEntry.objects.values_list("outcome", "detail")) == {
        ("denied", "queue is read-only")
    }
    settings.BULLPEN_READ_ONLY_QUEUES = ["*"]
    other = Queue(qname + "x", dashboard_redis)
    other.add("a", {})
    assert hx_post(admin_client, queue_url(other, "pause")).status_code == 403


def test_every_action_on_an_unknown_queue_refuses_and_writes_nothing(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """A mistyped queue: its page, fragments and job pages are our 404 page
    (with DEBUG on too, not Django's debug page), and every queue, job and
    triage action answers 404 without writing a key or an audit row."""
    settings.DEBUG = True
    r = sync_from_url(dashboard_redis)
    for url in [
        f"/queues/bull/{qname}/",
        f"/queues/bull/{qname}/fragments/jobs/",
        f"/queues/bull/{qname}/jobs/1/",
        f"/triage/bull/{qname}/",
    ]:
        response = admin_client.get(url)
        assert response.status_code == 404, url
        body = response.content.decode()
        assert f"No such queue: bull:{qname}" in body and 'id="not-found"' in body
        assert "/actions/" not in body and "technical" not in body.lower()
    urls = [
        reverse("bullpen:queue-action", args=["bull", qname, verb])
        for verb in queue.ACTIONS
    ]
    urls += [
        reverse("bullpen:job-action", args=["bull", qname, "1", verb])
        for verb in job.ACTIONS
    ]
    urls.append(reverse("bullpen:triage-action", args=["bull", qname, "retry-group"]))
    form = {"confirm": "1", "name": qname, "state": "completed", "grace_s": "0"}
    for url in urls:
        response = hx_post(admin_client, url, form)
        assert response.status_code == 404, url
        assert b"No such queue" in response.content, url
    assert r.keys(f"bull:{qname}*") == []
    assert not AuditEntry.objects.exists()


def test_a_configured_queue_is_known_before_it_exists(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """BULLPEN_QUEUES names queues that are shown, and can be acted on,
    before they have a key."""
    settings.BULLPEN_QUEUES = [qname]
    assert admin_client.get(f"/queues/bull/{qname}/").status_code == 200
    q = Queue(qname, dashboard_redis)
    assert hx_post(admin_client, queue_url(q, "pause")).status_code == 200
    assert q.is_paused()


def test_a_queue_served_by_a_gpu_worker_is_known_before_its_first_job(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """The GPU page links the queues that live workers serve: their pages
    answer before any job was added."""
    assert admin_client.get(f"/queues/bull/{qname}/").status_code == 404
    r = sync_from_url(dashboard_redis)
    record = {"id": f"h1:bull:{qname}:0", "host": "h1", "prefix": "bull"}
    beat(r, "worker", record["id"], {**record, "queue": qname})
    assert admin_client.get(f"/queues/bull/{qname}/").status_code == 200
