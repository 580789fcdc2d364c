"""Change priority and Duplicate, declared once (dashboard/shared/verbs.py),
reach as far as Retry: a row's button, a selection, a "select all" batch,
each validated, confirmed and audited like Retry; the job page's forms are
made from the same declarations."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from dashboard.console.bulk import records, runner
from dashboard.console.models import AuditEntry
from dashboard.shared.verbs import VERBS
from queues import Queue
from tests.dashboard.helpers import hx_post, job_url, make_active, run_jobs

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_runner_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches are run by the tests themselves."""
    monkeypatch.setattr(runner, "ensure_started", lambda: None)


def bulk(client: Client, q: Queue, **data: Any) -> Any:
    url = reverse("bullpen:queue-bulk", args=[q.prefix, q.name])
    return hx_post(client, url, data)


def run_batch(client: Client, q: Queue, verb: str, state: str, **extra: Any) -> Any:
    """Start a batch from the page's form and run it in chunks of 3."""
    data = {"verb": verb, "scope": "all", "state": state, "confirm": "1", **extra}
    response = bulk(client, q, **data)
    assert response.status_code == 200, response.content
    batch = records.latest(q.prefix, q.name)
    assert batch is not None and records.claim(batch.id, "t")
    return runner.run_batch(batch.id, "t", chunk=3, pause_s=0)


def _audit() -> list[tuple[str, str]]:
    return list(AuditEntry.objects.order_by("id").values_list("action", "outcome"))


def test_the_job_page_offers_the_declared_verbs(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A delayed job's page has one form per verb its state allows, the
    priority's field filled with the job's priority, and no other verb."""
    q = Queue(qname, dashboard_redis)
    job_id = q.add("d", {}, delay=60_000, priority=4).id
    html = admin_client.get(job_url(q, job_id)).content.decode()
    for verb in ("promote", "priority", "duplicate", "remove"):
        assert f"/actions/{verb}/" in html
    assert "/actions/retry/" not in html and "/actions/cancel/" not in html
    assert 'name="priority"' in html and 'value="4"' in html
    assert 'name="lifo"' in html and "Change priority" in html


def test_change_priority_and_duplicate_from_a_row(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """The row's buttons post to the job's action: a new priority moves a
    waiting job to prioritized; a duplicate of a failed job is a new waiting
    job; a priority outside BullMQ's range or a job in the wrong state is
    refused; each writes its audit row."""
    q = Queue(qname, dashboard_redis)
    active = make_active(q)
    waiting = q.add("w", {"n": 1}).id
    response = hx_post(admin_client, job_url(q, waiting, "priority"), {"priority": 3})
    assert response.status_code == 200 and b"to 3" in response.content
    assert q.get_job_state(waiting).value == "prioritized"
    assert q.get_job(waiting).priority == 3
    [failed] = run_jobs(q, 1, "failed", data={"x": 2})
    response = hx_post(admin_client, job_url(q, failed, "duplicate"))
    assert response.status_code == 200
    new_id = response.content.decode().split("as job ")[1].split("<")[0]
    assert q.get_job_state(new_id).value == "waiting"
    assert q.get_job(new_id).data == {"x": 2}
    too_big = {"priority": 2**21}
    assert (
        hx_post(admin_client, job_url(q, waiting, "priority"), too_big).status_code
        == 400
    )
    wrong = hx_post(admin_client, job_url(q, active, "priority"), {"priority": 1})
    assert wrong.status_code == 409 and b"it is active" in wrong.content
    assert _audit() == [
        ("job.priority", "ok"),
        ("job.duplicate", "ok"),
        ("job.priority", "error"),
        ("job.priority", "error"),
    ]


def test_change_priority_and_duplicate_of_a_selection(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Selected jobs get the new priority (those in other states are named
    and left alone); the selection's duplicates are added in one request;
    one audit row per request; a bad priority changes nothing."""
    q = Queue(qname, dashboard_redis)
    [failed] = run_jobs(q, 1, "failed")
    pending = [q.add("w", {}).id, q.add("d", {}, delay=60_000).id]
    bad = bulk(admin_client, q, verb="priority", ids=pending, priority=-1)
    assert bad.status_code == 400 and b"priority" in bad.content
    assert [q.get_job(i).priority for i in pending] == [0, 0]
    response = bulk(
        admin_client, q, verb="priority", ids=[*pending, failed], priority=9, lifo="1"
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert "priority: 2 of 3" in text and f"{failed}: it is failed" in text
    assert [q.get_job(i).priority for i in pending] == [9, 9]
    assert q.get_job_state(pending[0]).value == "prioritized"
    assert q.get_job_state(pending[1]).value == "delayed"
    before = q.get_counts("waiting")["waiting"]
    response = bulk(admin_client, q, verb="duplicate", ids=[failed, pending[1]])
    assert response.status_code == 200 and b"duplicate: 2 of 2" in response.content
    # A copy keeps the options the job was added with (no priority here).
    assert q.get_counts("waiting", "prioritized") == {
        "waiting": before + 2,
        "prioritized": 1,
    }
    assert _audit() == [
        ("jobs.priority", "error"),
        ("jobs.priority", "ok"),
        ("jobs.duplicate", "ok"),
    ]


def test_change_priority_of_all_prioritized_jobs_as_a_batch(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A batch over every prioritized job, in chunks smaller than the list:
    each job changed once (jobs it re-queues above its cursor are not acted
    on again), a job queued after it started is left alone; one audit row
    with the priority it set."""
    q = Queue(qname, dashboard_redis)
    ids = [q.add("p", {}, priority=p).id for p in (1, 2, 2, 5, 7, 7, 9, 3)]
    response = bulk(
        admin_client, q, verb="priority", scope="all", state="prioritized", priority=6
    )
    assert response.status_code == 200, response.content
    late = q.add("late", {}, priority=1).id
    batch = records.latest(q.prefix, q.name)
    assert batch is not None and records.claim(batch.id, "t")
    done = runner.run_batch(batch.id, "t", chunk=3, pause_s=0)
    assert done is not None and done.status == "done"
    assert (done.done, done.skipped, done.errors) == (8, 0, 0)
    assert {q.get_job(i).priority for i in ids} == {6}
    assert q.get_job(late).priority == 1
    entry = AuditEntry.objects.get()
    assert entry.action == "batch.priority" and "priority=6" in entry.detail
    assert "8 done" in entry.detail


def test_duplicate_and_change_priority_of_all_jobs_of_a_state(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Duplicate every failed job (each once, the copies waiting), change the
    priority of every delayed job; a state a verb's batch does not take is
    refused."""
    q = Queue(qname, dashboard_redis)
    failed = run_jobs(q, 7, "failed")
    batch = run_batch(admin_client, q, "duplicate", "failed")
    assert batch.status == "done" and batch.done == 7
    assert q.get_counts("failed", "waiting") == {"failed": 7, "waiting": 7}
    assert {q.get_job_state(i).value for i in failed} == {"failed"}
    delayed = [q.add("d", {}, delay=60_000 + i).id for i in range(5)]
    batch = run_batch(admin_client, q, "priority", "delayed", priority=2)
    assert batch.status == "done" and batch.done == 5
    assert {q.get_job(i).priority for i in delayed} == {2}
    refused = bulk(
        admin_client, q, verb="duplicate", scope="all", state="waiting", confirm="1"
    )
    assert refused.status_code == 400


def test_every_verb_is_offered_where_it_is_declared() -> None:
    """The batch verbs are those declaring batch states, and each batch
    state is one the verb applies to."""
    for verb in VERBS.values():
        assert verb.batch_states <= verb.states, verb.name
    assert {"priority", "duplicate"} <= {v for v in VERBS if VERBS[v].batch_states}
