"""The job page: data, options, result, progress, logs, error, timeline, VRAM,
flow tree across queues, and the actions its state allows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from dashboard.console.views.job import timeline
from gpu_workers.keys import BullpenKeys
from queues import FlowProducer, Job, Queue
from queues.connection import sync_from_url
from tests.dashboard.helpers import HX, job_url, make_active, run_jobs

pytestmark = pytest.mark.django_db


def _actions(html: str) -> set[str]:
    return {
        part.split("/")[0]
        for part in html.split('hx-post="')[1:]
        if "/jobs/" in part.split('"')[0]
        for part in [part.split("/actions/")[1]]
    }


def test_failed_job_shows_everything_and_retry(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Data, options, error and stack trace, logs, timeline and retry/remove."""
    q = Queue(qname, dashboard_redis)
    trace = json.dumps(["Traceback: line 1\n  in handler", "second attempt trace"])
    [job_id] = run_jobs(
        q,
        1,
        "failed",
        value="CUDA out of memory",
        name="txt2img",
        data={"prompt": "a cat"},
        fields=["stacktrace", trace],
    )
    q.get_job(job_id).log("loading weights")
    html = admin_client.get(job_url(q, job_id)).content.decode()
    assert "&quot;prompt&quot;: &quot;a cat&quot;" in html
    assert "CUDA out of memory" in html and "second attempt trace" in html
    assert "loading weights" in html and "1 line" in html
    for label in ("added", "started", "finished", "waited for", "ran for"):
        assert f"<dt>{label}</dt>" in html
    assert "<dt>delayed until</dt>" not in html
    assert "&quot;attempts&quot;" in html  # options
    assert _actions(html) == {"retry", "duplicate", "remove"}
    live = html.split("data-live=")[1].split(">")[0]
    assert f"&quot;jobs&quot;: [&quot;bull:{qname}:{job_id}&quot;]" in live
    assert f'data-live-state="bull:{qname}:{job_id}">failed<' in html


def test_completed_job_shows_return_value_and_vram(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """The return value and the declared vs measured VRAM of the GPU that ran it."""
    q = Queue(qname, dashboard_redis)
    [job_id] = run_jobs(q, 1, "completed", value={"image": "out.png"})
    r = sync_from_url(dashboard_redis)
    r.hset(
        BullpenKeys().job("bull", qname, job_id),
        mapping={
            "declared_bytes": 8 * 2**30,
            "peak_bytes": 6 * 2**30,
            "peak_source": "nvml-process",
            "gpu": "GPU-abc",
            "simulated": 1,
            "host": "host-a",
            "worker": "w-1",
            "outcome": "completed",
            "claimed_ms": 1_700_000_000_000,
            "started_ms": 1_700_000_004_200,  # held a slot 4.2 s for VRAM
        },
    )
    html = admin_client.get(job_url(q, job_id)).content.decode()
    assert "<dt>waited for VRAM</dt><dd>4.2 s <span" in html
    assert "&quot;image&quot;: &quot;out.png&quot;" in html
    assert "8.0 GiB" in html and "6.0 GiB" in html and "nvml-process" in html
    assert "GPU-abc" in html and "simulated" in html and "host-a / w-1" in html
    assert 'data-bar-width="75"' in html


def test_pending_and_active_jobs_offer_their_actions(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Delayed: promote and priority; active: cancel, never remove; the
    progress bar carries the live attributes."""
    q = Queue(qname, dashboard_redis)
    delayed = q.add("d", {}, delay=60_000)
    html = admin_client.get(job_url(q, delayed.id)).content.decode()
    assert _actions(html) == {"promote", "priority", "duplicate", "remove"}
    assert "<dt>runs at</dt>" in html and "Delayed until" in html
    active = make_active(q)
    q.get_job(active).update_progress({"percent": 30, "step": "sampling"})
    html = admin_client.get(job_url(q, active)).content.decode()
    assert _actions(html) == {"cancel", "duplicate"}
    assert f'data-live-progress="bull:{qname}:{active}"' in html
    assert "30" in html.split(f'data-live-progress-text="bull:{qname}:{active}">')[1]
    assert "every 5s" in html  # the log tail of a running job


def test_flow_tree_links_across_queues(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A parent lists its children in other queues; a child links to its parent."""
    flow = FlowProducer(dashboard_redis).add(
        {
            "name": "video",
            "queue_name": qname,
            "data": {},
            "children": [
                {"name": "frames", "queue_name": qname + "f", "data": {}},
                {"name": "audio", "queue_name": qname + "a", "data": {}},
            ],
        }
    )
    parent = Queue(qname, dashboard_redis)
    html = admin_client.get(job_url(parent, flow.job.id)).content.decode()
    for child in flow.children:
        url = reverse("bullpen:job", args=["bull", child.job.queue.name, child.job.id])
        assert f'href="{url}"' in html
    child = flow.children[0]
    html = admin_client.get(
        reverse("bullpen:job", args=["bull", child.job.queue.name, child.job.id])
    ).content.decode()
    assert f'href="{job_url(parent, flow.job.id)}"' in html
    assert "Parent:" in html


def test_large_data_is_cut_until_asked(
    dashboard_redis: str, admin_client: Client, settings: Any, qname: str
) -> None:
    """Data past BULLPEN_DATA_DETAIL_CHARS is cut with a link to see it whole."""
    settings.BULLPEN_DATA_DETAIL_CHARS = 200
    q = Queue(qname, dashboard_redis)
    job = q.add("big", {"blob": "y" * 1000})
    url = job_url(q, job.id)
    cut = admin_client.get(url).content.decode()
    assert "Show all" in cut and "y" * 1000 not in cut
    whole = admin_client.get(url, {"full": "1"}).content.decode()
    assert "y" * 1000 in whole and "Show all" not in whole


def test_detail_fragment_and_missing_job(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """The detail fragment re-renders on this job's events; a missing job is
    404 as a page and a short note as a fragment (which stops its polling)."""
    q = Queue(qname, dashboard_redis)
    job = q.add("x", {})
    url = reverse("bullpen:job-detail", args=["bull", qname, job.id])
    html = admin_client.get(url, **HX).content.decode()
    assert html.startswith(
        f'<div id="job-detail" data-live-job="bull:{qname}:{job.id}"'
    )
    assert 'hx-trigger="bullpen:job-event throttle:1s,' in html
    assert admin_client.get(job_url(q, "nope")).status_code == 404
    gone = admin_client.get(
        reverse("bullpen:job-detail", args=["bull", qname, "nope"]), **HX
    )
    assert gone.status_code == 200 and b"no longer exists" in gone.content
    assert b"hx-get" not in gone.content


def test_timeline_of_a_job_waiting_to_retry(dashboard_redis: str, qname: str) -> None:
    """After a failed attempt `delay` holds the backoff: the timeline keeps the
    add's delay (none here) for "waited for", and ends with when it runs."""
    q = Queue(qname, dashboard_redis)
    job = Job(
        q,
        "1",
        opts={"attempts": 3, "delay": 0},
        attempts_made=1,
        timestamp=1_000_000,
        delay=600_000,
        processed_on=1_000_050,
    )
    rows = timeline(job, due_ms=1_600_100)
    assert rows == [
        ("added", 1_000_000, "time"),
        ("started", 1_000_050, "time"),
        ("runs at", 1_600_100, "time"),
        ("waited for", 50, "duration"),
    ]


def test_timeline_past_a_first_attempt_names_the_attempt(
    dashboard_redis: str, qname: str
) -> None:
    """processedOn and finishedOn are the latest attempt's: past the first,
    the rows say which attempt, and the wait is until that attempt (it
    read as the queue's wait, earlier attempts and backoffs included)."""
    q = Queue(qname, dashboard_redis)
    job = Job(
        q,
        "1",
        opts={"attempts": 3},
        attempts_made=3,
        attempts_started=3,
        timestamp=1_000_000,
        processed_on=1_041_000,
        finished_on=1_048_600,
    )
    assert timeline(job) == [
        ("added", 1_000_000, "time"),
        ("attempt 3 started", 1_041_000, "time"),
        ("attempt 3 ended", 1_048_600, "time"),
        ("until attempt 3", 41_000, "duration"),
        ("attempt 3 ran", 7_600, "duration"),
    ]


def test_a_job_that_succeeded_on_retry_shows_the_old_error_as_earlier(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A completed job keeps BullMQ's failedReason of its failed attempt: the
    page shows it as an earlier attempt's error, not as the job's error; a
    failed job's error stays the red "Error"."""
    from tests.helpers import wait_until
    from tests.queues.worker.helpers import worker_thread

    def flaky(job: Any) -> str:
        if job.attempts_made == 0:
            raise RuntimeError("model not loaded")
        return "ok"

    q = Queue(qname, dashboard_redis)
    done = q.add("render", {}, attempts=2)
    with worker_thread(qname, flaky, dashboard_redis):
        wait_until(lambda: q.get_job_state(done.id) == "completed", 15)
    html = admin_client.get(job_url(q, done.id)).content.decode()
    assert "Error of an earlier attempt" in html and "model not loaded" in html
    assert '<h2 class="st-failed">Error</h2>' not in html

    (failed_id,) = run_jobs(q, 1, target="failed", value="out of memory")
    html = admin_client.get(job_url(q, failed_id)).content.decode()
    assert '<h2 class="st-failed">Error</h2>' in html
    assert "Error of an earlier attempt" not in html
    q.close()
