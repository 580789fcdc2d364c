"""Job verbs over the API (POST /queues/{q}/jobs/{id}/{verb}), made from the
declarations the pages use: retry, promote, change priority and duplicate,
their validation, errors and scope, and the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dashboard.api.models import ApiToken
from queues import Queue
from tests.api.conftest import ApiClient
from tests.api.test_validation import assert_error
from tests.dashboard.helpers import run_jobs


def act(api: ApiClient, q: Queue, job_id: str, verb: str, body: Any = None) -> Any:
    path = f"/api/v1/queues/{q.name}/jobs/{job_id}/{verb}"
    if body is None:
        return api.post(path, HTTP_AUTHORIZATION=f"Bearer {api.token}")
    return api.post_json(path, body)


@pytest.mark.django_db
def test_change_priority_and_duplicate(api: ApiClient, q: Queue) -> None:
    """A waiting job's priority changes (it moves to prioritized); a failed
    job's duplicate is a new waiting job with its name and data; the bodies
    say what was done."""
    [failed] = run_jobs(q, 1, "failed", name="gen", data={"p": 1})
    waiting = q.add("w", {}).id
    response = act(api, q, waiting, "priority", {"priority": 5, "lifo": True})
    assert response.status_code == 200, response.content
    assert response.json() == {
        "id": waiting,
        "action": "priority",
        "previous_state": "waiting",
        "message": f"set priority of job {waiting} to 5",
    }
    assert q.get_job_state(waiting).value == "prioritized"
    assert q.get_job(waiting).priority == 5
    response = act(api, q, failed, "duplicate")
    assert response.status_code == 200, response.content
    new_id = response.json()["new_id"]
    copy = q.get_job(new_id)
    assert (copy.name, copy.data) == ("gen", {"p": 1})
    assert q.get_job_state(new_id).value == "waiting"


@pytest.mark.django_db
def test_retry_and_promote(api: ApiClient, q: Queue) -> None:
    """Retry moves a failed job back to wait, promote a delayed one."""
    [failed] = run_jobs(q, 1, "failed")
    delayed = q.add("d", {}, delay=60_000).id
    assert act(api, q, failed, "retry").json()["previous_state"] == "failed"
    assert act(api, q, delayed, "promote").status_code == 200
    assert q.get_job_state(failed).value == "waiting"
    assert q.get_job_state(delayed).value == "waiting"


@pytest.mark.django_db
def test_wrong_state_missing_job_and_bad_bodies(api: ApiClient, q: Queue) -> None:
    """A job in a state the verb does not apply to is a 409 (and left
    alone), a missing job a 404, a priority out of BullMQ's range, an
    unknown field or a missing body a 400, a body not JSON a 415."""
    waiting = q.add("w", {}).id
    assert_error(act(api, q, waiting, "retry"), 409, "wrong_job_state")
    assert_error(act(api, q, "nope", "duplicate"), 404, "job_not_found")
    for body in ({"priority": 2**21}, {"priority": -1}, {"priority": 1, "x": 1}, {}):
        assert_error(act(api, q, waiting, "priority", body), 400, "invalid_body")
    assert_error(
        act(api, q, waiting, "priority", {"priority": "1"}), 400, "invalid_body"
    )
    plain = act(api, q, waiting, "priority")
    assert plain.status_code == 415
    assert q.get_job_state(waiting).value == "waiting"
    assert q.get_job(waiting).priority == 0


@pytest.mark.django_db
def test_a_read_only_token_may_not_act(
    make_token: Callable[..., tuple[ApiToken, str]], q: Queue
) -> None:
    """The verbs need the write scope."""
    [failed] = run_jobs(q, 1, "failed")
    reader = ApiClient(make_token(write=False)[1])
    assert_error(act(reader, q, failed, "retry"), 403, "insufficient_scope")
    assert q.get_job_state(failed).value == "failed"


def test_the_openapi_document_lists_each_verb(api: ApiClient) -> None:
    """One POST per verb (Remove and Cancel are the job's DELETE), Change
    priority's body schema made from its form."""
    doc = api.get("/api/v1/openapi.json").json()
    base = "/queues/{queue}/jobs/{job_id}/"
    for verb, op_id in [
        ("retry", "retryJob"),
        ("promote", "promoteJob"),
        ("priority", "changePriorityJob"),
        ("duplicate", "duplicateJob"),
    ]:
        assert doc["paths"][base + verb]["post"]["operationId"] == op_id
    assert base + "remove" not in doc["paths"]
    schema = doc["components"]["schemas"]["ChangePriorityRequest"]
    assert schema["properties"]["priority"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 2**21 - 1,
    }
    assert schema["required"] == ["priority"]
