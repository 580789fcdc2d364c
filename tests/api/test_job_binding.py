"""A ticket and a job's own webhook belong to the job they were made for, not
to its id: after the job is removed, a later job that reuses the id can
neither be read with the old ticket nor send events to the old webhook."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from dashboard.api.models import ApiToken
from queues import Job, Queue
from tests.api.conftest import ApiClient
from tests.api.helpers import Receiver, WorkerThread, dispatching, fast_config
from tests.api.test_validation import assert_error
from tests.helpers import wait_until as wait

REUSED = "reused-id"


@pytest.fixture
def receivers() -> Iterator[tuple[Receiver, Receiver]]:
    first, second = Receiver(), Receiver()
    yield first, second
    first.close()
    second.close()


def _enqueue(api: ApiClient, qname: str, job_id: str, url: str | None = None) -> Any:
    options: dict[str, Any] = {"job_id": job_id}
    if url:
        options["webhook_url"] = url
    response = api.post_json(
        f"/api/v1/queues/{qname}/jobs", {"name": "render", "options": options}
    )
    assert response.status_code == 201, response.content
    return response.json()


def _two_owners(
    make_token: Callable[..., tuple[ApiToken, str]],
) -> tuple[ApiClient, ApiClient]:
    return ApiClient(make_token(name="alice")[1]), ApiClient(make_token(name="bob")[1])


async def _done(job: Job) -> str:
    return "ok"


@pytest.mark.django_db
def test_old_ticket_cannot_read_a_later_job_with_the_same_id(
    make_token: Callable[..., tuple[ApiToken, str]], q: Queue, qname: str
) -> None:
    """Alice's ticket reads her job; once it is removed and Bob adds a job with
    the same id, her ticket finds no job (status and events), Bob's does."""
    alice, bob = _two_owners(make_token)
    first = _enqueue(alice, qname, REUSED)
    anonymous = Client()
    assert (
        anonymous.get(first["status_url"], {"ticket": first["ticket"]}).json()["name"]
        == "render"
    )
    assert alice.delete(first["status_url"]).status_code == 200
    second = _enqueue(bob, qname, REUSED)
    for url in (first["status_url"], first["events_url"]):
        assert_error(
            anonymous.get(url, {"ticket": first["ticket"]}), 404, "job_not_found"
        )
    mine = anonymous.get(second["status_url"], {"ticket": second["ticket"]})
    assert mine.status_code == 200 and mine.json()["id"] == REUSED


@pytest.mark.django_db
@pytest.mark.parametrize("readd", ["api", "another_client"])
def test_old_webhook_gets_no_events_of_a_later_job_with_the_same_id(
    make_token: Callable[..., tuple[ApiToken, str]],
    settings: Any,
    receivers: tuple[Receiver, Receiver],
    q: Queue,
    qname: str,
    api_redis: str,
    readd: str,
) -> None:
    """Alice enqueues a job with her webhook; it is removed before it runs.
    A later job with the same id (Bob's through the API, or one another client
    adds) runs to completion: Alice's webhook hears nothing of it."""
    settings.BULLPEN_WEBHOOK_ALLOW_PRIVATE = True
    alice_hook, bob_hook = receivers
    alice, bob = _two_owners(make_token)
    first = _enqueue(alice, qname, REUSED, alice_hook.url())
    assert alice.delete(first["status_url"]).status_code == 200
    if readd == "api":
        _enqueue(bob, qname, REUSED)
    else:
        q.add("render", {}, job_id=REUSED)
    # A job after it, whose webhook tells when the dispatcher is past it.
    _enqueue(bob, qname, "later", bob_hook.url())
    with dispatching(fast_config()):
        worker = WorkerThread(qname, _done, api_redis)
        try:
            wait(lambda: "completed" in bob_hook.events(), what="bob's webhook")
        finally:
            worker.stop()
    assert q.get_job_state(REUSED).value == "completed"
    assert [r.json["job_id"] for r in alice_hook.requests] == []
