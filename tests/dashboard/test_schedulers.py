"""The job schedulers page: every scheduler with its next run and last job, and
its audited actions (create, edit, run now, pause and restore, remove), refused
without `operate_queues`, on read-only queues and for bad input, which changes
nothing."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.urls import reverse

from dashboard.console.models import AuditEntry
from queues import Queue, ops
from tests.dashboard.helpers import hx_post
from tests.interop.helpers import call
from tests.queues.transitions.helpers import claimed, move_to_active

pytestmark = pytest.mark.django_db


def page_url(q: Queue) -> str:
    """The schedulers page of q."""
    return reverse("bullpen:schedulers", args=[q.prefix, q.name])


def act(q: Queue, sid: str, verb: str) -> str:
    """An action on one scheduler of q."""
    return reverse("bullpen:scheduler-action", args=[q.prefix, q.name, sid, verb])


def create_url(q: Queue) -> str:
    """The create action of q's schedulers."""
    return reverse("bullpen:scheduler-create", args=[q.prefix, q.name])


def audit_rows() -> list[tuple[str, str, str]]:
    """(target, action, outcome) of every audit row, oldest first."""
    return list(
        AuditEntry.objects.order_by("id").values_list("target", "action", "outcome")
    )


def snapshot(q: Queue) -> list[dict[str, Any]]:
    """Every scheduler of q as Node reports them, to compare before and after."""
    return [s.to_dict() for s in q.get_job_schedulers(asc=True)]


def take_first_iteration(q: Queue, sid: str) -> str:
    """Claim the scheduler's waiting iteration and add the next one, as a
    worker does; the id of the claimed (last) job."""
    got = claimed(move_to_active(q, now=ops.now_ms(), count=1))
    [(job_id, _, _)] = got
    job = q.get_job(job_id)
    assert job is not None and job.repeat_job_key == sid
    assert q.schedule_next_iteration(job)
    return str(job_id)


def test_page_lists_every_scheduler_with_next_run_and_last_job(
    dashboard_redis: str, viewer_client: Client, qname: str
) -> None:
    """An `every` and a cron scheduler show their repeat, next run, runs and
    template; the last job links to the iteration a worker took; a viewer sees
    no action."""
    q = Queue(qname, dashboard_redis)
    q.upsert_job_scheduler(
        "tick", every_ms=60_000, template={"name": "render", "data": {"w": 512}}
    )
    q.upsert_job_scheduler(
        "nightly",
        cron="0 30 2 * * *",
        tz="Europe/Paris",
        limit=9,
        template={"data": {"n": 1}, "opts": {"attempts": 3}},
    )
    last = take_first_iteration(q, "tick")
    tick = q.get_job_scheduler("tick")
    assert tick is not None and tick.next is not None
    assert last == f"repeat:tick:{tick.next - 60_000}"
    html = viewer_client.get(page_url(q)).content.decode()
    assert "2 schedulers" in html
    assert "every 1 m 00 s" in html and "<code>0 30 2 * * *</code>" in html
    assert "Europe/Paris" in html and "render" in html and "&quot;w&quot;: 512" in html
    assert "&quot;attempts&quot;: 3" in html and "1 / 9" in html
    job_page = reverse("bullpen:job", args=["bull", qname, last])
    assert f'href="{job_page}"' in html and ">active<" in html
    nightly = q.get_job_scheduler("nightly")
    assert nightly is not None
    assert f'data-next-ms="{nightly.next}"' in html
    assert "none yet" in html  # the cron scheduler has not run
    q.upsert_job_scheduler("x", every_ms=9000, template={"data": "<script>x</script>"})
    hostile = viewer_client.get(page_url(q)).content.decode()
    assert "<script>x" not in hostile and "&lt;script&gt;x" in hostile
    assert "/actions/" not in html
    queue_html = viewer_client.get(reverse("bullpen:queue", args=["bull", qname]))
    assert f'href="{page_url(q)}"' in queue_html.content.decode()


def test_last_job_of_a_cron_scheduler(
    dashboard_redis: str, viewer_client: Client, qname: str
) -> None:
    """For a cron pattern the last job is the iteration of the slot before the
    next run, in the scheduler's zone."""
    q = Queue(qname, dashboard_redis)
    q.upsert_job_scheduler("five", cron="0 */5 * * * *", tz="Asia/Kolkata")
    first = q.get_job_scheduler("five")
    assert first is not None and first.next is not None
    q.promote_jobs()
    last = take_first_iteration(q, "five")
    assert last == f"repeat:five:{first.next}"
    now = q.get_job_scheduler("five")
    assert now is not None and now.next == first.next + 300_000
    html = viewer_client.get(page_url(q)).content.decode()
    job_page = reverse("bullpen:job", args=["bull", qname, last])
    assert f'href="{job_page}"' in html and ">active<" in html
    assert "none yet" not in html


def test_page_is_paginated(
    dashboard_redis: str, viewer_client: Client, qname: str, settings: Any
) -> None:
    """Schedulers are read a page at a time, soonest next run first."""
    settings.BULLPEN_PAGE_SIZE = 2
    q = Queue(qname, dashboard_redis)
    for i in range(5):
        q.upsert_job_scheduler(f"s{i}", every_ms=1000 * (i + 1), start_date=None)
    html = viewer_client.get(page_url(q), {"page": 3}).content.decode()
    assert "5 schedulers · page 3 of 3" in html
    assert html.count("data-scheduler=") == 1


def test_create_edit_run_now_and_remove_are_audited(
    dashboard_redis: str, operator_client: Client, qname: str
) -> None:
    """An operator creates a cron scheduler, edits it to `every`, runs it now
    (one more job, schedule unchanged) and removes it; one ok row each."""
    q = Queue(qname, dashboard_redis)
    q.add("seed", {})  # the queue exists
    form = {
        "scheduler_id": "thumbs",
        "pattern": "0 */5 * * * *",
        "tz": "UTC",
        "name": "thumb",
        "job_data": '{"size": 256}',
        "job_opts": '{"attempts": 2, "backoff": {"type": "fixed", "delay": 1000}}',
    }
    response = hx_post(operator_client, create_url(q), form)
    assert response.status_code == 200, response.content
    s = q.get_job_scheduler("thumbs")
    assert s is not None and s.pattern == "0 */5 * * * *" and s.tz == "UTC"
    assert s.name == "thumb" and s.template["data"] == {"size": 256}
    assert s.template["opts"]["attempts"] == 2
    assert s.next is not None and s.next % 300_000 == 0
    again = hx_post(operator_client, create_url(q), form)
    assert again.status_code == 400 and b"exists already" in again.content
    edited = {**form, "pattern": "", "every_ms": "90000", "job_data": '{"size": 64}'}
    assert hx_post(operator_client, act(q, "thumbs", "edit"), edited).status_code == 200
    s = q.get_job_scheduler("thumbs")
    assert s is not None and s.every == 90_000 and s.pattern is None
    pending = q.get_jobs(["waiting", "delayed"])
    assert [j.id for j in pending if j.repeat_job_key == "thumbs"] == [
        f"repeat:thumbs:{s.next}"
    ]  # the cron iteration went with the old definition
    assert s.template["data"] == {"size": 64}
    before = snapshot(q)
    waiting = q.get_counts("waiting", "delayed")
    response = hx_post(operator_client, act(q, "thumbs", "run"))
    assert (
        response.status_code == 200 and b"ran scheduler thumbs now" in response.content
    )
    assert snapshot(q) == before
    after = q.get_counts("waiting", "delayed")
    assert sum(after.values()) == sum(waiting.values()) + 1
    job_id = AuditEntry.objects.first().detail.rsplit("job ", 1)[1]  # type: ignore[union-attr]
    ran = q.get_job(job_id)
    assert ran is not None and ran.name == "thumb" and ran.data == {"size": 64}
    assert ran.opts["attempts"] == 2 and not ran.repeat_job_key
    assert hx_post(operator_client, act(q, "thumbs", "remove")).status_code == 200
    assert q.get_job_scheduler("thumbs") is None
    target = f"bull:{qname}"
    assert audit_rows() == [
        (target, "scheduler.create", "ok"),
        (target, "scheduler.create", "error"),
        (f"{target}:thumbs", "scheduler.edit", "ok"),
        (f"{target}:thumbs", "scheduler.run", "ok"),
        (f"{target}:thumbs", "scheduler.remove", "ok"),
    ]


def test_pause_keeps_the_definition_and_restore_recreates_it(
    dashboard_redis: str, operator_client: Client, qname: str
) -> None:
    """Pause removes the scheduler (BullMQ has no paused state), its audit row
    holds the definition, the page offers Restore, and Restore brings back the
    same definition; a second Restore refuses."""
    q = Queue(qname, dashboard_redis)
    q.upsert_job_scheduler(
        "digest",
        cron="0 0 9 * * 1",
        tz="America/New_York",
        limit=50,
        template={"name": "mail", "data": {"to": "ops"}, "opts": {"priority": 3}},
    )
    before = q.get_job_scheduler("digest")
    assert before is not None
    assert hx_post(operator_client, act(q, "digest", "pause")).status_code == 200
    assert q.get_job_scheduler("digest") is None
    assert q.get_counts("delayed")["delayed"] == 0
    entry = AuditEntry.objects.first()
    assert entry is not None and entry.action == "scheduler.pause"
    kept = json.loads(entry.detail.split("definition: ", 1)[1])
    assert kept["pattern"] == "0 0 9 * * 1" and kept["template"]["data"] == {
        "to": "ops"
    }
    html = operator_client.get(page_url(q)).content.decode()
    assert 'data-paused="digest"' in html and act(q, "digest", "restore") in html
    assert hx_post(operator_client, act(q, "digest", "restore")).status_code == 200
    after = q.get_job_scheduler("digest")
    assert after is not None
    for attr in ("pattern", "tz", "limit", "name", "next", "template"):
        assert getattr(after, attr) == getattr(before, attr), attr
    html = operator_client.get(page_url(q)).content.decode()
    assert 'data-paused="digest"' not in html
    second = hx_post(operator_client, act(q, "digest", "restore"))
    assert second.status_code == 400 and b"was not paused" in second.content


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"pattern": "61 * * * *"}, "invalid cron pattern"),
        ({"pattern": "", "every_ms": "0"}, "every_ms"),
        ({"pattern": "", "every_ms": ""}, "either every (ms) or a cron pattern"),
        ({"every_ms": "1000"}, "either every (ms) or a cron pattern"),
        ({"tz": "Mars/Olympus"}, "unknown time zone"),
        ({"limit": "0"}, "limit"),
        ({"job_data": "{not json"}, "job_data: not JSON"),
        ({"job_opts": "[1]"}, "must be a JSON object"),
        ({"job_opts": '{"jobId": "x"}'}, "opts cannot hold jobId"),
        ({"job_opts": '{"delay": 5}'}, "opts cannot hold delay"),
        ({"job_opts": '{"attempts": -1}'}, "attempts must be"),
        ({"end_date_ms": "1000"}, "must be in the future"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    dashboard_redis: str,
    operator_client: Client,
    qname: str,
    change: dict[str, str],
    error: str,
) -> None:
    """Each bad field answers 400 with a clear message, on create and on edit,
    and leaves the schedulers as they were."""
    q = Queue(qname, dashboard_redis)
    q.upsert_job_scheduler("keep", cron="0 * * * * *", template={"data": {"a": 1}})
    before = snapshot(q)
    form = {"scheduler_id": "new", "pattern": "*/10 * * * * *", "job_data": "{}"}
    form.update(change)
    for url in (create_url(q), act(q, "keep", "edit")):
        response = hx_post(operator_client, url, form)
        assert response.status_code == 400, (url, response.content)
        assert error in response.content.decode()
        assert snapshot(q) == before
    assert {o for _, _, o in audit_rows()} == {"error"}


def test_permissions_read_only_and_unknown_schedulers(
    dashboard_redis: str,
    viewer_client: Client,
    operator_client: Client,
    settings: Any,
    qname: str,
) -> None:
    """A viewer is refused every action (audited as denied); a read-only queue
    refuses an operator; an unknown scheduler is a clear error."""
    q = Queue(qname, dashboard_redis)
    q.upsert_job_scheduler("s", every_ms=5000)
    before = snapshot(q)
    for verb in ("run", "pause", "remove", "edit"):
        assert hx_post(viewer_client, act(q, "s", verb)).status_code == 403
    assert (
        hx_post(viewer_client, create_url(q), {"scheduler_id": "x"}).status_code == 403
    )
    assert snapshot(q) == before
    assert {o for _, _, o in audit_rows()} == {"denied"}
    settings.BULLPEN_READ_ONLY_QUEUES = [f"bull:{qname}"]
    html = operator_client.get(page_url(q)).content.decode()
    assert "is read-only here" in html and "/actions/" not in html
    assert hx_post(operator_client, act(q, "s", "remove")).status_code == 403
    assert snapshot(q) == before
    settings.BULLPEN_READ_ONLY_QUEUES = []
    missing = hx_post(operator_client, act(q, "nope", "run"))
    assert missing.status_code == 400 and b"no scheduler" in missing.content
    assert hx_post(operator_client, act(q, "s", "frobnicate")).status_code == 404


def test_node_made_scheduler_shows_and_edits_right(
    dashboard_redis: str, operator_client: Client, qname: str
) -> None:
    """A scheduler upserted by Node BullMQ shows its pattern, zone, limit and
    template; editing its pattern from the page keeps the rest, and Node reads
    the edited scheduler back; run now adds a job with the template's opts."""
    if shutil.which("node") is None:
        pytest.skip("NODE.JS NOT FOUND: the Node BullMQ scheduler check was NOT run")
    template = {
        "name": "report",
        "data": {"team": "gpu"},
        "opts": {"attempts": 4, "backoff": {"type": "fixed", "delay": 2000}},
    }
    call(
        dashboard_redis,
        qname,
        "upsertJobScheduler",
        "weekly",
        {"pattern": "0 0 8 * * 1", "tz": "Asia/Tokyo", "limit": 20},
        template,
    )
    q = Queue(qname, dashboard_redis)
    html = operator_client.get(page_url(q)).content.decode()
    assert 'data-scheduler="weekly"' in html and "<code>0 0 8 * * 1</code>" in html
    assert "Asia/Tokyo" in html and "report" in html and "1 / 20" in html
    assert "&quot;team&quot;: &quot;gpu&quot;" in html and "backoff" in html
    form = {
        "pattern": "0 0 9 * * 2",
        "tz": "Asia/Tokyo",
        "limit": "20",
        "name": "report",
        "job_data": '{"team": "gpu"}',
        "job_opts": '{"attempts": 4, "backoff": {"type": "fixed", "delay": 2000}}',
    }
    edited = hx_post(operator_client, act(q, "weekly", "edit"), form)
    assert edited.status_code == 200, edited.content
    record = call(dashboard_redis, qname, "getJobScheduler", "weekly")
    assert record["pattern"] == "0 0 9 * * 2" and record["tz"] == "Asia/Tokyo"
    assert record["limit"] == 20 and record["name"] == "report"
    assert record["template"] == {"data": template["data"], "opts": template["opts"]}
    assert (
        datetime.fromtimestamp(record["next"] / 1000, ZoneInfo("Asia/Tokyo")).strftime(
            "%a %H:%M"
        )
        == "Tue 09:00"
    )
    assert hx_post(operator_client, act(q, "weekly", "run")).status_code == 200
    job_id = AuditEntry.objects.first().detail.rsplit("job ", 1)[1]  # type: ignore[union-attr]
    job = call(dashboard_redis, qname, "getJob", job_id)
    assert job["name"] == "report" and job["data"] == {"team": "gpu"}
    assert job["opts"]["attempts"] == 4
    assert job["opts"]["backoff"] == {"type": "fixed", "delay": 2000}


def test_plain_forms_return_to_the_schedulers_page(
    dashboard_redis: str, operator_client: Client, qname: str
) -> None:
    """Without htmx, success and refusal alike go back to the page the form
    was on (the schedulers page), with the message for the next page view."""
    q = Queue(qname, dashboard_redis)
    q.upsert_job_scheduler("s", every_ms=5000)
    back = {"next": page_url(q)}
    ran = operator_client.post(act(q, "s", "run"), back)
    assert ran.status_code == 303 and ran["Location"] == page_url(q)
    bad = operator_client.post(act(q, "s", "edit"), {**back, "every_ms": "-1"})
    assert bad.status_code == 303 and bad["Location"] == page_url(q)
    html = operator_client.get(page_url(q)).content.decode()
    assert "every_ms: Ensure this value is greater than or equal to 1." in html
    gone = operator_client.post(act(q, "s", "remove"))
    assert gone.status_code == 303 and gone["Location"] == page_url(q)
    assert q.get_job_scheduler("s") is None
