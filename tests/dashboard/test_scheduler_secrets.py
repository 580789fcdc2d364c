"""BULLPEN_REDACT on what the schedulers page and the audit log show of a
scheduler's template data: a viewer never sees a redacted field (page, edit
form, audit page and its filters, rows written before redaction was applied
on write), an edit that leaves a redacted field alone keeps its stored value,
and pause / restore keeps the secret out of the audit row yet restores it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from django.test import Client
from django.urls import reverse

from dashboard.console.models import AuditEntry
from dashboard.shared.redaction import REDACTED
from queues import Queue
from tests.dashboard.helpers import hx_post

pytestmark = pytest.mark.django_db

SECRET = "pw-SECRET-7171"
HOOK = "dashboard.shared.redaction.redact_sensitive_keys"
DATA = {
    "w": 512,
    "password": SECRET,
    "db": {"api_key": SECRET + "-nested", "host": "db-primary"},
}


def page_url(q: Queue) -> str:
    """The schedulers page of q."""
    return reverse("bullpen:schedulers", args=[q.prefix, q.name])


def act(q: Queue, sid: str, verb: str) -> str:
    """An action on one scheduler of q."""
    return reverse("bullpen:scheduler-action", args=[q.prefix, q.name, sid, verb])


@pytest.fixture
def redacting(settings: Any) -> None:
    """Redaction on, with the hook that hides secret-looking keys."""
    settings.BULLPEN_REDACT = HOOK


def secret_scheduler(q: Queue, sid: str = "nightly") -> None:
    """A scheduler whose template data holds secrets at two depths."""
    q.upsert_job_scheduler(
        sid, every_ms=60_000, template={"name": "sync", "data": DATA}
    )


def test_page_and_edit_form_hide_redacted_template_data(
    dashboard_redis: str,
    viewer_client: Client,
    operator_client: Client,
    qname: str,
    redacting: None,
) -> None:
    """Neither a viewer's page nor an operator's edit form holds a redacted
    value; the rest of the data shows, and the form shows the marker."""
    q = Queue(qname, dashboard_redis)
    secret_scheduler(q)
    for client in (viewer_client, operator_client):
        html = client.get(page_url(q)).content.decode()
        assert SECRET not in html
        assert "&quot;w&quot;: 512" in html and "db-primary" in html
        assert REDACTED in html
    operator_html = operator_client.get(page_url(q)).content.decode()
    assert act(q, "nightly", "edit") in operator_html


def test_edit_keeps_redacted_fields_at_their_key_paths(
    dashboard_redis: str, operator_client: Client, qname: str, redacting: None
) -> None:
    """Saving the form as shown, with one plain field changed, keeps the
    stored secrets (nested ones too); a marker at a path the stored data does
    not have is kept as typed, never filled from elsewhere."""
    q = Queue(qname, dashboard_redis)
    secret_scheduler(q)
    shown = {
        "w": 1024,
        "password": REDACTED,
        "db": {"api_key": REDACTED, "host": "db2"},
        "copy": REDACTED,
    }
    form = {"every_ms": "60000", "name": "sync", "job_data": json.dumps(shown)}
    response = hx_post(operator_client, act(q, "nightly", "edit"), form)
    assert response.status_code == 200, response.content
    s = q.get_job_scheduler("nightly")
    assert s is not None
    assert s.template["data"] == {
        "w": 1024,
        "password": SECRET,
        "db": {"api_key": SECRET + "-nested", "host": "db2"},
        "copy": REDACTED,
    }
    replaced = {**shown, "password": "new-one"}
    form["job_data"] = json.dumps(replaced)
    assert hx_post(operator_client, act(q, "nightly", "edit"), form).status_code == 200
    s = q.get_job_scheduler("nightly")
    assert s is not None and s.template["data"]["password"] == "new-one"


def test_edit_without_redaction_stores_what_was_typed(
    dashboard_redis: str, operator_client: Client, qname: str
) -> None:
    """With redaction off the form shows the data as stored, and a typed
    marker is plain text."""
    q = Queue(qname, dashboard_redis)
    secret_scheduler(q)
    assert SECRET in operator_client.get(page_url(q)).content.decode()
    form = {"every_ms": "60000", "job_data": json.dumps({"password": REDACTED})}
    assert hx_post(operator_client, act(q, "nightly", "edit"), form).status_code == 200
    s = q.get_job_scheduler("nightly")
    assert s is not None and s.template["data"] == {"password": REDACTED}


def test_pause_keeps_secrets_out_of_the_audit_row_and_restore_brings_them_back(
    dashboard_redis: str,
    viewer_client: Client,
    operator_client: Client,
    qname: str,
    redacting: None,
) -> None:
    """The pause's audit row holds the redacted definition; the audit page and
    its filters show no secret; Restore re-creates the full template."""
    q = Queue(qname, dashboard_redis)
    secret_scheduler(q)
    before = q.get_job_scheduler("nightly")
    assert before is not None
    assert hx_post(operator_client, act(q, "nightly", "pause")).status_code == 200
    entry = AuditEntry.objects.get(action="scheduler.pause")
    assert SECRET not in entry.detail and REDACTED in entry.detail
    audit = reverse("bullpen:audit")
    for query in ({}, {"target": f"bull:{qname}"}, {"action": "scheduler"}):
        html = viewer_client.get(audit, query).content.decode()
        assert "scheduler.pause" in html and SECRET not in html, query
    assert SECRET not in viewer_client.get(page_url(q)).content.decode()
    assert hx_post(operator_client, act(q, "nightly", "restore")).status_code == 200
    after = q.get_job_scheduler("nightly")
    assert after is not None and after.template == before.template
    assert after.every == before.every and after.name == before.name


def test_restore_refuses_when_the_kept_copy_is_gone(
    dashboard_redis: str, operator_client: Client, qname: str, redacting: None
) -> None:
    """A redacted pause whose full copy is lost (Redis flushed) is not
    restored with the markers in place of the secrets."""
    q = Queue(qname, dashboard_redis)
    secret_scheduler(q)
    assert hx_post(operator_client, act(q, "nightly", "pause")).status_code == 200
    r = redis.Redis.from_url(dashboard_redis)
    kept = [k for k in r.scan_iter("bullpen:*") if b"scheduler" in k]
    assert kept, "the full definition is kept in Bullpen's namespace"
    r.delete(*kept)
    r.close()
    response = hx_post(operator_client, act(q, "nightly", "restore"))
    assert response.status_code == 400 and b"re-create it" in response.content
    assert q.get_job_scheduler("nightly") is None


def test_audit_rows_written_before_the_fix_are_redacted_when_shown(
    dashboard_redis: str, viewer_client: Client, qname: str, redacting: None
) -> None:
    """A pause row that holds the whole definition (written before pauses
    were redacted) shows redacted on the audit page."""
    definition = {"key": "old", "name": "old", "every": 1000, "template": {}}
    definition["template"] = {"data": DATA}
    AuditEntry.objects.create(
        username="op",
        target=f"bull:{qname}:old",
        action="scheduler.pause",
        outcome="ok",
        detail="paused; definition: " + json.dumps(definition),
    )
    html = viewer_client.get(reverse("bullpen:audit")).content.decode()
    assert "scheduler.pause" in html and SECRET not in html
    assert "db-primary" in html


def hide_all(value: Any) -> Any:
    """A redaction hook that hides a value whole."""
    return REDACTED


def test_a_hook_that_hides_everything_keeps_the_data_on_save(
    dashboard_redis: str, operator_client: Client, qname: str, settings: Any
) -> None:
    """With a hook that hides the whole data, the form shows only the marker
    and saving it unchanged (another field edited) keeps the stored data."""
    settings.BULLPEN_REDACT = "tests.dashboard.test_scheduler_secrets.hide_all"
    q = Queue(qname, dashboard_redis)
    secret_scheduler(q)
    html = operator_client.get(page_url(q)).content.decode()
    assert SECRET not in html and "db-primary" not in html
    form = {"every_ms": "30000", "name": "sync", "job_data": json.dumps(REDACTED)}
    assert hx_post(operator_client, act(q, "nightly", "edit"), form).status_code == 200
    s = q.get_job_scheduler("nightly")
    assert s is not None and s.every == 30_000 and s.template["data"] == DATA
