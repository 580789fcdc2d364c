"""Lists you can act on: per-row buttons only where the state allows and only
for operators, the selected ids acted on in one request (validated: nothing
is done on bad input), the export as JSON Lines."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from dashboard.console.bulk import runner
from dashboard.console.bulk.selection import MAX_IDS
from dashboard.console.models import AuditEntry
from queues import Queue
from tests.dashboard.helpers import HX, hx_post, make_active, queue_url, run_jobs

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_runner_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches are run by the tests themselves (test_bulk_runner.py)."""
    monkeypatch.setattr(runner, "ensure_started", lambda: None)


def bulk_url(q: Queue) -> str:
    return reverse("bullpen:queue-bulk", args=[q.prefix, q.name])


def export_url(q: Queue) -> str:
    return reverse("bullpen:queue-export", args=[q.prefix, q.name])


def row_buttons(html: str) -> dict[str, set[str]]:
    """Job id -> the verbs of its row's buttons."""
    found: dict[str, set[str]] = {}
    for job_id, verb in re.findall(r'/jobs/([^/"]+)/actions/([a-z]+)/', html):
        found.setdefault(job_id, set()).add(verb)
    return found


def test_row_actions_follow_the_state_and_work(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Failed and completed rows offer Retry, delayed Promote, active Cancel
    (never Remove), the others Remove; pending rows Change priority, every
    row Duplicate (issue 23: their reach, as Retry's); each button's POST
    does what it says and writes its audit row."""
    q = Queue(qname, dashboard_redis)
    [failed] = run_jobs(q, 1, "failed")
    [done] = run_jobs(q, 1, "completed")
    delayed = q.add("d", {}, delay=60_000).id
    active = make_active(q)
    waiting = q.add("w", {}).id
    html = admin_client.get(queue_url(q)).content.decode()
    buttons = row_buttons(html)
    assert buttons[failed] == {"retry", "duplicate", "remove"}
    assert buttons[done] == {"retry", "duplicate", "remove"}
    assert buttons[delayed] == {"promote", "priority", "duplicate", "remove"}
    assert buttons[active] == {"duplicate", "cancel"}
    assert buttons[waiting] == {"priority", "duplicate", "remove"}
    assert f'name="ids" value="{failed}"' in html
    assert hx_post(admin_client, _job_action(q, failed, "retry")).status_code == 200
    assert hx_post(admin_client, _job_action(q, delayed, "promote")).status_code == 200
    removed = hx_post(admin_client, _job_action(q, done, "remove"), {"confirm": "1"})
    assert removed.status_code == 200 and removed["HX-Redirect"]
    assert q.get_job_state(failed).value == "waiting"
    assert q.get_job_state(delayed).value == "waiting"
    assert q.get_job(done) is None
    actions = list(AuditEntry.objects.values_list("action", flat=True))
    assert sorted(actions) == ["job.promote", "job.remove", "job.retry"]


def _job_action(q: Queue, job_id: str, verb: str) -> str:
    return reverse("bullpen:job-action", args=[q.prefix, q.name, job_id, verb])


def test_viewers_get_checkboxes_and_export_but_no_actions(
    dashboard_redis: str, viewer_client: Client, qname: str
) -> None:
    """A viewer may select and export, not act: no row or bar buttons, and a
    bulk POST is refused (and audited as denied)."""
    q = Queue(qname, dashboard_redis)
    [failed] = run_jobs(q, 1, "failed")
    html = viewer_client.get(queue_url(q) + "?state=failed").content.decode()
    assert 'name="ids"' in html and "data-bulk-export" in html
    assert row_buttons(html) == {} and "data-bulk-verb" not in html
    refused = hx_post(viewer_client, bulk_url(q), {"verb": "retry", "ids": failed})
    assert refused.status_code == 403
    assert q.get_job_state(failed).value == "failed"
    assert AuditEntry.objects.get().outcome == "denied"


def test_selected_ids_are_acted_on_in_one_request(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Retry of three failed jobs moves them back to wait; a selection with
    jobs in other states acts on those it can and names the others; one audit
    row per request, with the count."""
    q = Queue(qname, dashboard_redis)
    ids = run_jobs(q, 3, "failed")
    response = hx_post(admin_client, bulk_url(q), {"verb": "retry", "ids": ids})
    assert response.status_code == 200
    assert response["HX-Trigger"] == "bullpen:changed"
    assert b"retry: 3 of 3 job(s)" in response.content
    assert {q.get_job_state(i).value for i in ids} == {"waiting"}
    delayed = q.add("d", {}, delay=60_000).id
    mixed = [delayed, ids[0], "no-such-job"]
    response = hx_post(admin_client, bulk_url(q), {"verb": "promote", "ids": mixed})
    assert response.status_code == 200
    text = response.content.decode()
    assert "promote: 1 of 3" in text and "it is waiting" in text
    assert "no longer exists" in text
    assert q.get_job_state(delayed).value == "waiting"
    rows = list(AuditEntry.objects.order_by("id").values_list("action", "detail"))
    assert [a for a, _ in rows] == ["jobs.retry", "jobs.promote"]
    assert rows[0][1].startswith("retry: 3 of 3")


@pytest.mark.parametrize(
    ("ids", "status", "message"),
    [
        ([], 400, "no job selected"),
        (["meta"], 400, "not a job id"),
        ([""], 400, "not a job id"),
        ([f"j{i}" for i in range(MAX_IDS + 1)], 400, f"at most {MAX_IDS}"),
    ],
)
def test_bad_selections_are_refused_and_nothing_changes(
    dashboard_redis: str,
    admin_client: Client,
    qname: str,
    ids: list[str],
    status: int,
    message: str,
) -> None:
    """No ids, an id naming a queue key, an empty id or too many: a clear
    error, an audit row saying so, every job where it was."""
    q = Queue(qname, dashboard_redis)
    failed = run_jobs(q, 2, "failed")
    data: dict[str, Any] = {"verb": "retry", "ids": ids + failed if ids else []}
    response = hx_post(admin_client, bulk_url(q), data)
    assert response.status_code == status
    assert message in response.content.decode()
    assert {q.get_job_state(i).value for i in failed} == {"failed"}
    assert AuditEntry.objects.get().outcome == "error"


def test_wrong_state_and_unconfirmed_remove_change_nothing(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Promote of failed jobs is refused (409, each named with its state);
    remove without its confirmation is refused (400); no job moves."""
    q = Queue(qname, dashboard_redis)
    ids = run_jobs(q, 2, "failed")
    wrong = hx_post(admin_client, bulk_url(q), {"verb": "promote", "ids": ids})
    assert wrong.status_code == 409
    assert f"{ids[0]}: it is failed" in wrong.content.decode()
    unconfirmed = admin_client.post(bulk_url(q), {"verb": "remove", "ids": ids}, **HX)
    assert unconfirmed.status_code == 400
    assert {q.get_job_state(i).value for i in ids} == {"failed"}
    unknown = hx_post(admin_client, bulk_url(q), {"verb": "explode", "ids": ids})
    assert unknown.status_code == 404


def test_remove_and_cancel_selected(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Remove deletes the selected jobs; Cancel asks the worker of each
    active one (a cancel key per job)."""
    q = Queue(qname, dashboard_redis)
    ids = run_jobs(q, 2, "completed")
    data = {"verb": "remove", "ids": ids, "confirm": "1"}
    assert hx_post(admin_client, bulk_url(q), data).status_code == 200
    assert [q.get_job(i) for i in ids] == [None, None]
    active = make_active(q)
    data = {"verb": "cancel", "ids": [active], "confirm": "1"}
    response = hx_post(admin_client, bulk_url(q), data)
    assert response.status_code == 200, response.content
    assert q.client.exists(f"bullpen:cancel:bull:{qname}:{active}")


def _lines(response: Any) -> list[dict[str, Any]]:
    body = b"".join(response.streaming_content).decode()
    assert body.endswith("\n")
    return [json.loads(line) for line in body.splitlines()]


def test_export_selected_and_all_as_json_lines(
    dashboard_redis: str, admin_client: Client, qname: str, settings: Any
) -> None:
    """The selection, or every job of the tab, one JSON object per line with
    queue and state, job content redacted by BULLPEN_REDACT, an odd job (data
    not JSON) exported as far as it reads; one audit row per export."""
    settings.BULLPEN_REDACT = "dashboard.shared.redaction.redact_sensitive_keys"
    q = Queue(qname, dashboard_redis)
    ids = run_jobs(q, 3, "failed", data={"token": "s3cret", "n": 1})
    q.client.hset(f"bull:{qname}:{ids[1]}", "data", "{not json")
    response = admin_client.post(
        export_url(q), {"state": "failed", "ids": [ids[2], ids[0]]}
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/jsonl"
    assert "attachment" in response["Content-Disposition"]
    lines = _lines(response)
    assert [line["id"] for line in lines] == [ids[2], ids[0]]
    assert lines[0]["data"] == {"token": "[redacted]", "n": 1}
    assert lines[0]["state"] == "failed" and lines[0]["queue"] == f"bull:{qname}"
    assert lines[0]["failedReason"] == "boom"
    everything = _lines(
        admin_client.post(export_url(q), {"state": "failed", "scope": "all"})
    )
    assert sorted(line["id"] for line in everything) == sorted(ids)
    odd = next(line for line in everything if line["id"] == ids[1])
    assert "malformed" in odd and odd["data"] == "{not json"
    # The whole tab is a plain download URL too (a GET, oldest first).
    fetched = admin_client.get(export_url(q), {"state": "failed", "order": "oldest"})
    assert [line["id"] for line in _lines(fetched)] == ids
    rows = list(AuditEntry.objects.order_by("id").values_list("action", "detail"))
    assert rows == [
        ("jobs.export", "exported 2 selected job(s)"),
        ("jobs.export", "exported all 3 failed job(s)"),
        ("jobs.export", "exported all 3 failed job(s)"),
    ]
