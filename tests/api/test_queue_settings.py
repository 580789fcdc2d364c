"""Per-queue default job options of the API (QueueSettings, edited in the
Django admin): applied under each enqueue request's own options."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from dashboard.api.models import QueueSettings
from queues import Queue
from tests.api.conftest import ApiClient

SEED_DEFAULTS = {
    "attempts": 3,
    "backoff": {"type": "exponential", "delay": 5000},
    "remove_on_complete": {"age": 3600},
    "remove_on_fail": {"age": 86400},
}


def enqueue(api: ApiClient, queue: str, options: dict[str, object]) -> str:
    response = api.post_json(
        f"/api/v1/queues/{queue}/jobs", {"name": "gen", "options": options}
    )
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


@pytest.mark.django_db
def test_enqueue_applies_the_queue_defaults_under_the_request(
    api: ApiClient, q: Queue, qname: str
) -> None:
    """A job enqueued without options gets the queue's defaults; an option the
    request gives replaces its default whole; other queues are untouched."""
    QueueSettings.objects.create(queue=qname, default_job_options=SEED_DEFAULTS)
    bare = q.get_job(enqueue(api, qname, {}))
    assert bare.opts["attempts"] == 3
    assert bare.opts["backoff"] == {"type": "exponential", "delay": 5000}
    assert bare.opts["removeOnComplete"] == {"age": 3600}
    assert bare.opts["removeOnFail"] == {"age": 86400}
    own = q.get_job(enqueue(api, qname, {"attempts": 1, "backoff": 10}))
    assert own.opts["attempts"] == 1
    assert own.opts["backoff"] == {"type": "fixed", "delay": 10}
    assert own.opts["removeOnComplete"] == {"age": 3600}
    other = Queue(qname + "x", q.client)
    assert other.get_job(enqueue(api, qname + "x", {})).opts["attempts"] == 0


@pytest.mark.django_db
def test_admin_edits_the_defaults_and_refuses_bad_ones(
    admin_client: Client, api: ApiClient, q: Queue, qname: str
) -> None:
    """Queue settings saved in the admin apply to the next enqueue; options
    the API does not take, or bad values, are form errors."""
    url = "/admin/bullpen_api/queuesettings/add/"
    for bad in ({"job_id": "x"}, {"attempts": 0}, {"backoff": {"delay": 3}}):
        refused = admin_client.post(
            url, {"queue": qname, "default_job_options": json.dumps(bad)}
        )
        assert refused.status_code == 200, bad
        assert "errorlist" in refused.content.decode(), bad
    assert not QueueSettings.objects.exists()
    saved = admin_client.post(
        url, {"queue": qname, "default_job_options": json.dumps({"priority": 9})}
    )
    assert saved.status_code == 302
    assert q.get_job(enqueue(api, qname, {})).opts["priority"] == 9
    row = QueueSettings.objects.get()
    admin_client.post(
        f"/admin/bullpen_api/queuesettings/{row.pk}/change/",
        {"queue": qname, "default_job_options": json.dumps({"lifo": True})},
    )
    job = q.get_job(enqueue(api, qname, {}))
    assert job.opts.get("lifo") is True and "priority" not in job.opts
