"""Every job and queue action: its effect, its audit row, htmx and plain-form
responses, confirmation for destructive ones, refusals in the wrong state."""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from dashboard.console.models import AuditEntry
from gpu_workers.keys import BullpenKeys
from queues import Queue
from tests.dashboard.helpers import hx_post, job_url, make_active, queue_url, run_jobs

pytestmark = pytest.mark.django_db


def _audit() -> list[tuple[str, str, str, str]]:
    return list(
        AuditEntry.objects.order_by("id").values_list(
            "username", "target", "action", "outcome"
        )
    )


# --- job actions --------------------------------------------------------------
def test_retry_promote_and_priority(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Each moves the job as asked, answers a flash that tells htmx to refresh,
    and writes one audit row."""
    q = Queue(qname, dashboard_redis)
    [failed] = run_jobs(q, 1, "failed")
    response = hx_post(admin_client, job_url(q, failed, "retry"))
    assert response.status_code == 200
    assert response["HX-Trigger"] == "bullpen:changed"
    assert b"retried job" in response.content
    assert q.get_job_state(failed).value == "waiting"
    delayed = q.add("d", {}, delay=60_000).id
    assert hx_post(admin_client, job_url(q, delayed, "promote")).status_code == 200
    assert q.get_job_state(delayed).value == "waiting"
    assert (
        hx_post(
            admin_client, job_url(q, delayed, "priority"), {"priority": 7}
        ).status_code
        == 200
    )
    assert q.get_job_state(delayed).value == "prioritized"
    assert q.get_job(delayed).priority == 7
    key = f"bull:{qname}"
    assert _audit() == [
        ("admin", f"{key}:{failed}", "job.retry", "ok"),
        ("admin", f"{key}:{delayed}", "job.promote", "ok"),
        ("admin", f"{key}:{delayed}", "job.priority", "ok"),
    ]
    entry = AuditEntry.objects.first()  # newest first
    assert entry is not None and entry.user is not None and entry.created_at
    assert "to 7" in entry.detail


def test_action_in_the_wrong_state_is_refused_and_audited(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Promoting a failed job, or a bad priority, is a 409/400 with the reason."""
    q = Queue(qname, dashboard_redis)
    [failed] = run_jobs(q, 1, "failed")
    response = hx_post(admin_client, job_url(q, failed, "promote"))
    assert response.status_code == 409 and b"it is failed" in response.content
    response = hx_post(
        admin_client, job_url(q, q.add("w", {}).id, "priority"), {"priority": -1}
    )
    assert response.status_code == 400
    response = hx_post(admin_client, job_url(q, "missing", "retry"))
    assert response.status_code == 409 and b"no longer exists" in response.content
    assert [o for *_, o in _audit()] == ["error", "error", "error"]


def test_remove_needs_confirmation_and_redirects(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Remove is refused unconfirmed; confirmed, the job is gone and htmx is
    sent to the queue page."""
    q = Queue(qname, dashboard_redis)
    job_id = q.add("x", {}).id
    assert hx_post(admin_client, job_url(q, job_id, "remove")).status_code == 400
    assert q.get_job(job_id) is not None
    response = hx_post(admin_client, job_url(q, job_id, "remove"), {"confirm": "1"})
    assert response.status_code == 200
    assert response["HX-Redirect"] == queue_url(q)
    assert q.get_job(job_id) is None
    assert [(a, o) for _, _, a, o in _audit()] == [
        ("job.remove", "error"),
        ("job.remove", "ok"),
    ]


def test_remove_is_not_offered_for_an_active_job(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A job a worker holds cannot be removed, only cancelled."""
    q = Queue(qname, dashboard_redis)
    job_id = make_active(q)
    response = hx_post(admin_client, job_url(q, job_id, "remove"), {"confirm": "1"})
    assert response.status_code == 409
    assert q.get_job(job_id) is not None


def test_cancel_asks_the_gpu_worker(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Cancel sets the cancel request the GPU worker polls (Fleet.request_cancel)."""
    q = Queue(qname, dashboard_redis)
    job_id = make_active(q)
    assert hx_post(admin_client, job_url(q, job_id, "cancel")).status_code == 400
    response = hx_post(admin_client, job_url(q, job_id, "cancel"), {"confirm": "1"})
    assert response.status_code == 200
    r = redis.Redis.from_url(dashboard_redis)
    assert r.exists(BullpenKeys().cancel("bull", qname, job_id))
    waiting = q.add("w", {}).id
    assert (
        hx_post(
            admin_client, job_url(q, waiting, "cancel"), {"confirm": "1"}
        ).status_code
        == 409
    )


def test_duplicate_copies_name_data_and_retry_options(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A duplicate is a new job with the same name, data, attempts and backoff."""
    q = Queue(qname, dashboard_redis)
    original = q.add(
        "render",
        {"prompt": "a cat"},
        attempts=3,
        backoff={"type": "fixed", "delay": 500},
        job_id="custom-1",
    )
    response = hx_post(admin_client, job_url(q, original.id, "duplicate"))
    assert response.status_code == 200
    new_id = response.content.decode().split("as job ")[1].split("<")[0]
    copy = q.get_job(new_id)
    assert new_id != "custom-1"
    assert (copy.name, copy.data, copy.attempts) == ("render", {"prompt": "a cat"}, 3)
    assert copy.opts["backoff"] == {"type": "fixed", "delay": 500}


def test_plain_form_post_redirects_back_with_a_message(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Without htmx, an action answers 303 to the page, which shows the message."""
    q = Queue(qname, dashboard_redis)
    [failed] = run_jobs(q, 1, "failed")
    response = admin_client.post(job_url(q, failed, "retry"))
    assert response.status_code == 303 and response["Location"] == job_url(q, failed)
    page = admin_client.get(response["Location"]).content.decode()
    assert "retried job" in page
    response = admin_client.post(job_url(q, failed, "retry"))
    assert response.status_code == 303
    assert "cannot retry" in admin_client.get(response["Location"]).content.decode()


# --- queue actions ---------------------------------------------------------------
def test_pause_and_resume(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Pause and resume reload the page (its header changes) and are audited."""
    q = Queue(qname, dashboard_redis)
    q.add("x", {})
    response = hx_post(admin_client, queue_url(q, "pause"))
    assert response.status_code == 200 and response["HX-Redirect"] == queue_url(q)
    assert q.is_paused()
    assert "Resume" in admin_client.get(queue_url(q)).content.decode()
    hx_post(admin_client, queue_url(q, "resume"))
    assert not q.is_paused()
    assert [(t, a) for _, t, a, _ in _audit()] == [
        (f"bull:{qname}", "queue.pause"),
        (f"bull:{qname}", "queue.resume"),
    ]


def test_retry_all_failed_in_batches_and_promote_all(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Every failed job (more than one retry batch) goes back to wait in a few
    script calls; every delayed job is promoted."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 1500, "failed")
    stats = redis.Redis.from_url(dashboard_redis)
    stats.config_resetstat()
    response = hx_post(admin_client, queue_url(q, "retry-failed"))
    assert response.status_code == 200
    assert q.get_counts("failed", "waiting") == {"failed": 0, "waiting": 1500}
    calls = sum(
        v["calls"]
        for k, v in stats.info("commandstats").items()
        if k in ("cmdstat_evalsha", "cmdstat_eval")
    )
    assert calls < 10
    for i in range(3):
        q.add("d", {}, delay=60_000 + i)
    hx_post(admin_client, queue_url(q, "promote-all"))
    assert q.get_counts("delayed")["delayed"] == 0
    assert AuditEntry.objects.get(action="queue.retry_failed").detail.startswith(
        "retried 1500"
    )


def test_clean_with_grace_and_drain_need_confirmation(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Clean deletes a state's jobs older than the grace; drain deletes
    waiting (and delayed) jobs; both refuse to run unconfirmed."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 4, "completed", value=1)
    url = queue_url(q, "clean")
    assert (
        hx_post(admin_client, url, {"state": "completed", "grace_s": 0}).status_code
        == 400
    )
    hx_post(admin_client, url, {"state": "completed", "grace_s": 3600, "confirm": "1"})
    assert q.get_counts("completed")["completed"] == 4  # all younger than the grace
    response = hx_post(
        admin_client,
        url,
        {"state": "completed", "grace_s": 0, "limit": 3, "confirm": "1"},
    )
    assert response.status_code == 200 and response["HX-Redirect"] == queue_url(q)
    assert AuditEntry.objects.first().detail.startswith("cleaned 3 completed")
    assert q.get_counts("completed")["completed"] == 1
    q.add_bulk([{"name": "w", "data": {}} for _ in range(5)])
    q.add("d", {}, delay=60_000)
    assert hx_post(admin_client, queue_url(q, "drain")).status_code == 400
    hx_post(admin_client, queue_url(q, "drain"), {"confirm": "1"})
    assert q.get_counts("waiting", "delayed") == {"waiting": 0, "delayed": 1}
    hx_post(admin_client, queue_url(q, "drain"), {"confirm": "1", "delayed": "1"})
    assert q.get_counts("delayed")["delayed"] == 0
    assert [o for *_, o in _audit()] == ["error", "ok", "ok", "error", "ok", "ok"]


def test_obliterate_only_when_paused_and_named(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Obliterate needs a paused queue and its name typed; then the queue is
    gone and htmx is sent to the overview."""
    q = Queue(qname, dashboard_redis)
    q.add_bulk([{"name": "w", "data": {}} for _ in range(3)])
    url = queue_url(q, "obliterate")
    response = hx_post(admin_client, url, {"confirm": qname})
    assert response.status_code == 400 and b"pause" in response.content
    q.pause()
    assert hx_post(admin_client, url, {"confirm": "wrong"}).status_code == 400
    assert q.get_counts("waiting")["waiting"] == 3
    response = hx_post(admin_client, url, {"confirm": qname})
    assert response.status_code == 200 and response["HX-Redirect"] == "/"
    assert q.get_counts("waiting")["waiting"] == 0 and not q.get_meta()
    assert [o for *_, o in _audit()] == ["error", "error", "ok"]


def test_concurrency_and_rate_limit_set_and_lift(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Blank fields lift a limit; half a rate limit is refused."""
    q = Queue(qname, dashboard_redis)
    q.add("x", {})
    hx_post(admin_client, queue_url(q, "concurrency"), {"concurrency": 2})
    assert q.get_meta()["concurrency"] == "2"
    html = admin_client.get(queue_url(q)).content.decode()
    assert "concurrency: 2" in html
    hx_post(admin_client, queue_url(q, "concurrency"), {"concurrency": ""})
    assert "concurrency" not in q.get_meta()
    assert (
        hx_post(admin_client, queue_url(q, "rate-limit"), {"max": 5}).status_code == 400
    )
    hx_post(admin_client, queue_url(q, "rate-limit"), {"max": 5, "duration_ms": 1000})
    assert "5 / 1000 ms" in admin_client.get(queue_url(q)).content.decode()
    hx_post(admin_client, queue_url(q, "rate-limit"), {"max": "", "duration_ms": ""})
    assert "max" not in q.get_meta()
    assert (
        hx_post(
            admin_client, queue_url(q, "concurrency"), {"concurrency": 0}
        ).status_code
        == 400
    )


def test_audit_page_and_job_history(
    dashboard_redis: str, admin_client: Client, viewer_client: Client, qname: str
) -> None:
    """The audit page lists actions newest first, filtered by target (a queue
    and its jobs, not queues sharing a name prefix); the job page shows its own."""
    q, other = Queue(qname, dashboard_redis), Queue(qname + "2", dashboard_redis)
    [failed] = run_jobs(q, 1, "failed")
    other.add("a", {})
    hx_post(admin_client, job_url(q, failed, "retry"))
    hx_post(admin_client, queue_url(q, "pause"))
    hx_post(viewer_client, queue_url(other, "pause"))
    html = viewer_client.get("/audit/").content.decode()
    assert html.index("queue.pause") < html.index("job.retry")
    assert "denied" in html and "u-viewer" in html
    html = viewer_client.get("/audit/", {"target": f"bull:{qname}"}).content.decode()
    assert "job.retry" in html and "queue.pause" in html and "denied" not in html
    page = admin_client.get(job_url(q, failed)).content.decode()
    assert "Operator actions" in page and "retried job" in page
