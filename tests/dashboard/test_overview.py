"""The overview page, served by Django against the real test Redis."""

from __future__ import annotations

import base64

import pytest
import redis
from django.test import Client

from dashboard.console.reads import overview
from dashboard.shared import discovery
from queues import Queue, ops
from queues.connection import sync_from_url
from tests.dashboard.helpers import HX, run_jobs

pytestmark = pytest.mark.django_db


def test_overview_requires_login(dashboard_redis: str) -> None:
    """Anonymous users are sent to the login page."""
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def _row(html: str, key: str) -> str:
    row = html[html.index(f'data-queue="{key}"') :]
    return row[: row.index("</tr>")]


def test_overview_lists_discovered_queues(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A queue created by any client shows up with its counts and paused flag."""
    q = Queue(qname, dashboard_redis)
    q.add_bulk([{"name": "a", "data": {"n": i}} for i in range(3)])
    q.add("later", {}, delay=60_000)
    q.pause()
    html = admin_client.get("/").content.decode()
    row = _row(html, f"bull:{qname}")
    assert "paused" in row
    counts = {
        state: row.split(f'data-live-count="bull:{qname}:{state}">')[1].split("<")[0]
        for state in (
            "active",
            "completed",
            "delayed",
            "failed",
            "prioritized",
            "waiting",
            "waiting-children",
        )
    }
    assert counts == {
        "active": "0",
        "completed": "0",
        "delayed": "1",
        "failed": "0",
        "prioritized": "0",
        "waiting": "3",
        "waiting-children": "0",
    }
    # The page follows every listed queue over the live socket.
    assert f"&quot;bull:{qname}&quot;" in html.split("data-live=")[1].split(">")[0]


def test_configured_queue_shows_before_it_exists(
    dashboard_redis: str,
    admin_client: Client,
    settings,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    """Queues named in BULLPEN_QUEUES are listed even with no key in Redis."""
    settings.BULLPEN_QUEUES = [qname, f"other:{qname}x"]
    settings.BULLPEN_PREFIXES = ["bull", "other"]
    html = admin_client.get("/").content.decode()
    assert f'data-queue="bull:{qname}"' in html
    assert f'data-queue="other:{qname}x"' in html


def test_throughput_oldest_waiting_and_workers(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Sparklines count completed/failed per minute; the oldest waiting job's
    age and the connected workers (BullMQ connection names) are shown."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 2, "failed")
    [first, *_] = run_jobs(q, 3, "completed", value=1)
    q.add("old", {}, timestamp=ops.now_ms() - 3_600_000)
    worker = sync_from_url(dashboard_redis)
    worker.client_setname(f"bull:{base64.b64encode(qname.encode()).decode()}:w:host-a")
    # Read as of the completions (one finish call, one finishedOn, after the
    # failures): a minute turning before the read would put them in the
    # minute before the last.
    done = q.get_job(first)
    assert done is not None and done.finished_on is not None
    try:
        [stats] = overview.overview(
            [discovery.QueueRef("bull", qname)], now_ms=done.finished_on
        )
        assert sum(stats.completed_per_min) == 3
        assert sum(stats.failed_per_min) == 2
        assert stats.completed_per_min[-1] == 3
        assert 3_590_000 < (stats.oldest_waiting_ms or 0) < 3_700_000
        assert stats.workers == 1
        row = _row(admin_client.get("/").content.decode(), f"bull:{qname}")
        assert "3 completed, 2 failed" in row
        assert "1 h 00 m" in row
    finally:
        worker.close()


def test_filter_and_sort(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """`q` filters by name; `sort` orders by a column, descending by default."""
    small, big, other = (
        Queue(qname + "a", dashboard_redis),
        Queue(qname + "b", dashboard_redis),
        Queue("zzz" + qname, dashboard_redis),
    )
    small.add("x", {})
    big.add_bulk([{"name": "x", "data": {}} for _ in range(5)])
    other.add("x", {})
    html = admin_client.get("/", {"q": qname[1:], "sort": "waiting"}).content.decode()
    assert html.index(f'data-queue="bull:{qname}b"') < html.index(
        f'data-queue="bull:{qname}a"'
    )
    html = admin_client.get("/", {"q": qname + "a"}).content.decode()
    assert f"bull:{qname}b" not in html.split('id="queue-table"')[1]
    # The table alone, as htmx refreshes it.
    fragment = admin_client.get("/fragments/queues/", {"sort": "name"}, **HX)
    text = fragment.content.decode()
    assert text.lstrip().startswith('<div id="queue-table"')
    assert text.index(f"bull:{qname}a") < text.index(f"bull:zzz{qname}")


def test_throughput_uses_bullmq_metrics_when_retention_deleted_the_jobs(
    dashboard_redis: str, r: redis.Redis, qname: str
) -> None:
    """Workers with the metrics option (Bullpen's GPU workers by default, Node
    with `metrics: {maxDataPoints}`) keep per-minute counts that survive
    removeOnComplete; the sparkline takes them where they exceed the jobs
    still in completed/failed."""
    now = ops.now_ms()
    base = f"bull:{qname}:"
    r.hset(base + "meta", "opts.maxLenEvents", 10000)
    # The open minute (now) has 12 - 5 = 7; the three before: 4, 0, 3.
    r.hset(
        base + "metrics:completed", mapping={"count": 12, "prevTS": now, "prevCount": 5}
    )
    r.rpush(base + "metrics:completed:data", 4, 0, 3)
    r.hset(
        base + "metrics:failed",
        mapping={"count": 2, "prevTS": now - 120_000, "prevCount": 0},
    )
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 1, "failed")  # one failed job kept this minute: max(1, 0)
    [stats] = overview.overview([discovery.QueueRef("bull", qname)], now_ms=now)
    assert stats.completed_per_min[-4:] == [3, 0, 4, 7]
    assert stats.failed_per_min[-3:] == [2, 0, 1]


def test_discovery_is_cached_and_refreshed_in_background(
    dashboard_redis: str,
    settings,
    qname: str,  # type: ignore[no-untyped-def]
) -> None:
    """A costly SCAN's result is reused (20x its cost, at most the TTL); once
    stale, a background rescan picks up new queues while the stale list is
    served."""
    settings.BULLPEN_DISCOVERY_TTL_S = 60
    Queue(qname, dashboard_redis).add("x", {})
    assert discovery.QueueRef("bull", qname) in discovery.known_queues()
    discovery._discovery.scan_s = 1.0  # as if a million keys: fresh for 20 s
    assert discovery._discovery.ttl() == 20
    Queue(qname + "new", dashboard_redis).add("x", {})
    assert discovery.QueueRef("bull", qname + "new") not in discovery.known_queues()
    discovery._discovery.at -= 120
    stale = discovery.known_queues()  # starts the refresh, answers at once
    assert discovery.QueueRef("bull", qname + "new") not in stale
    import time

    deadline = time.monotonic() + 5
    while discovery.QueueRef("bull", qname + "new") not in discovery.known_queues():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_cheap_discovery_shows_a_new_queue_on_the_next_page(
    dashboard_redis: str,
    settings,
    qname: str,
    admin_client: Client,
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """A scan no longer than INLINE_SCAN_S (a small keyspace's, about a
    millisecond on a quiet machine) is redone inside the request once its
    result is 20 times its own time old: a queue created a moment ago is on
    the next overview."""
    import queues.discovery

    settings.BULLPEN_DISCOVERY_TTL_S = 30
    admin_client.get("/")
    # The rule is under test, not this machine's speed: the threshold sits
    # above this run's scan (a quiet fresh-clone run's took 88 ms, > 0.05 s).
    took = discovery._discovery.scan_s
    inline = max(queues.discovery.INLINE_SCAN_S, 2 * took)
    monkeypatch.setattr(queues.discovery, "INLINE_SCAN_S", inline)
    assert discovery._discovery.ttl() == min(30, queues.discovery.TTL_PER_SCAN * took)
    Queue(qname, dashboard_redis).add("x", {})
    import time

    time.sleep(max(discovery._discovery.ttl(), 0) + 0.01)
    assert f"bull:{qname}" in admin_client.get("/").content.decode()


def test_prewarm_scans_once_and_first_pages_answer_from_the_registry(
    dashboard_redis: str,
    settings,  # type: ignore[no-untyped-def]
    qname: str,
    monkeypatch,  # type: ignore[no-untyped-def]
    admin_client: Client,
) -> None:
    """The server's start-up scan is the one the first pages use: on a large
    keyspace, requests arriving while it runs answer at once with the
    registry's queues that still exist (the last costly scan's list; one
    removed since is left out) instead of scanning again, and the overview
    says it is still looking; once the scan ends, pages have its result, a
    queue made meanwhile included."""
    import threading
    import time

    import queues.discovery
    from queues.discovery import REGISTRY_KEY

    settings.BULLPEN_DISCOVERY_TTL_S = 60
    monkeypatch.setattr(queues.discovery, "SMALL_KEYSPACE", 0)  # as if 1M keys
    Queue(qname, dashboard_redis).add("x", {})
    r = sync_from_url(dashboard_redis)  # a cluster too (tests/cluster)
    r.sadd(REGISTRY_KEY, f"bull:{qname}", f"bull:{qname}-gone")
    calls = []
    release = threading.Event()
    real = discovery.discover_queues

    def slow_scan(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(threading.current_thread().name)
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(discovery, "discover_queues", slow_scan)
    discovery.prewarm_discovery()
    discovery.prewarm_discovery()  # one in flight already: no second scan
    Queue(qname + "-new", dashboard_redis).add("x", {})
    results: list[list[discovery.QueueRef]] = []
    readers = [
        threading.Thread(target=lambda: results.append(discovery.known_queues()))
        for _ in range(3)
    ]
    for t in readers:
        t.start()
    for t in readers:
        t.join(10)  # while the scan is still held
    assert len(calls) == 1 and len(results) == 3
    for found in results:
        names = {ref.name for ref in found}
        assert qname in names and qname + "-gone" not in names
        assert qname + "-new" not in names
    assert not discovery._discovery.complete()
    page = admin_client.get("/").content.decode()
    assert "data-discovering" in page and "every 2s" in page
    assert f'data-queue="bull:{qname}"' in page
    release.set()
    deadline = time.monotonic() + 10
    while discovery.QueueRef("bull", qname + "-new") not in discovery.known_queues():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert len(calls) == 1 and discovery._discovery.complete()
    page = admin_client.get("/").content.decode()
    assert "data-discovering" not in page and f'data-queue="bull:{qname}-new"' in page


def test_internal_webhook_queue_is_kept_off_user_lists(
    dashboard_redis: str, admin_client: Client, viewer_client: Client, qname: str
) -> None:
    """The webhook deliveries queue is not listed for operators (overview,
    search, triage); admins see it on the overview apart, marked internal."""
    Queue("bullpen-webhooks", dashboard_redis).add("deliver", {})
    run_jobs(Queue(qname, dashboard_redis), 1, "failed")
    internal = 'data-queue="bull:bullpen-webhooks"'
    html = viewer_client.get("/").content.decode()
    assert f'data-queue="bull:{qname}"' in html and internal not in html
    for url in ("/search/", "/triage/"):
        html = admin_client.get(url).content.decode()
        assert f"bull:{qname}" in html and "bullpen-webhooks" not in html, url
    html = admin_client.get("/").content.decode()
    head, _, tail = html.partition('<tbody class="internal"')
    assert f'data-queue="bull:{qname}"' in head and internal in tail
    assert ">internal</span>" in tail
    page = admin_client.get("/queues/bull/bullpen-webhooks/").content.decode()
    assert ">internal</span>" in page
