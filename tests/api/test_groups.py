"""Groups of jobs enqueued over the API (docs/groups.md): every job a token
adds takes the token's group (explicit, else derived from its name); a token
with may_set_group puts a job in a sub-group `<its group>/<given>`; one
without gets a clear 400; group_jobs=False keeps jobs ungrouped. The job
resource shows its group. The apitoken command and the admin set the flags."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from dashboard.api.grouping import derived_group
from dashboard.api.models import ApiToken
from queues import Queue
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db


def token(name: str = "acme", **fields: Any) -> ApiClient:
    """A read/write client whose token has these fields."""
    _, plain = ApiToken.issue(name, "*", True, True, None, **fields)
    return ApiClient(plain)


def enqueue(api: ApiClient, queue: str, **options: Any) -> Any:
    body = {"name": "gen", "data": {}, "options": options}
    return api.post_json(f"/api/v1/queues/{queue}/jobs", body)


def group_of(q: Queue, job_id: str) -> str | None:
    job = q.get_job(job_id)
    assert job is not None
    found = job.opts.get("group")
    return found["id"] if found else None


def added(api: ApiClient, q: Queue, **options: Any) -> str:
    response = enqueue(api, q.name, **options)
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def test_jobs_take_the_tokens_group(q: Queue) -> None:
    """Derived from the token's name by default, the explicit group when set;
    the job resource shows it and the group counts the job waiting."""
    derived = added(token("Acme Corp: prod"), q)
    assert group_of(q, derived) == "Acme-Corp--prod"
    explicit = added(token("shop", group="tenant.7"), q)
    assert group_of(q, explicit) == "tenant.7"
    api = token("reader")
    body = api.get(f"/api/v1/queues/{q.name}/jobs/{explicit}").json()
    assert body["group"] == "tenant.7"
    info = q.get_group("tenant.7")
    assert info is not None and info.waiting == 1


def test_derived_groups_are_valid_ids() -> None:
    """Characters a group id cannot hold, and '/', become '-'; cut to 100."""
    assert derived_group("a/b c:d_é.@+-") == "a-b-c-d_-.@+-"
    assert derived_group("x" * 150) == "x" * 100
    assert derived_group("") == "-"


def test_may_set_group_makes_sub_groups(q: Queue) -> None:
    """With may_set_group, options.group "sub-1" puts the job in
    "<token group>/sub-1"; without options.group it takes the token's group."""
    api = token("reseller", may_set_group=True)
    assert group_of(q, added(api, q, group="sub-1")) == "reseller/sub-1"
    assert group_of(q, added(api, q, group="team/a.b")) == "reseller/team/a.b"
    assert group_of(q, added(api, q)) == "reseller"


@pytest.mark.parametrize(
    ("fields", "group", "code"),
    [
        ({}, "sub-1", "group_not_allowed"),
        ({"may_set_group": True}, "bad:colon", "invalid_group"),
        ({"may_set_group": True}, "", "invalid_group"),
        ({"may_set_group": True}, "x" * 95, "invalid_group"),
        ({"group_jobs": False}, "sub-1", "group_not_allowed"),
    ],
)
def test_bad_or_forbidden_groups_are_400(
    q: Queue, fields: dict[str, Any], group: Any, code: str
) -> None:
    """A token without the flag, a bad id or one too long once prefixed: a
    400 with a clear code and message, and nothing added."""
    response = enqueue(token("reseller", **fields), q.name, group=group)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == code and "group" in error["message"]
    assert q.get_counts("waiting")["waiting"] == 0 and q.count_groups() == 0


def test_group_jobs_off_keeps_jobs_ungrouped(q: Queue) -> None:
    """A token with group_jobs=False adds jobs as before: no group, in wait."""
    job_id = added(token("legacy", group_jobs=False), q)
    assert group_of(q, job_id) is None
    assert q.client.lrange(q.keys.wait, 0, -1) == [job_id]
    body = token("reader").get(f"/api/v1/queues/{q.name}/jobs/{job_id}").json()
    assert body["group"] is None


def test_token_fields_are_checked() -> None:
    """A bad explicit group, or may_set_group on a token without groups, is
    refused when the token is made."""
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        ApiToken.issue("x", "*", True, True, None, group="no:colons")
    with pytest.raises(ValidationError):
        ApiToken.issue("x", "*", True, True, None, group_jobs=False, may_set_group=True)


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("apitoken", *args, stdout=out)
    return out.getvalue()


def test_apitoken_command_sets_the_group_flags() -> None:
    """--group, --may-set-group, --no-group-jobs and the admin scope."""
    created = json.loads(
        run(
            "create",
            "--name",
            "reseller",
            "--queues",
            "*",
            "--scope",
            "write,admin",
            "--group",
            "r1",
            "--may-set-group",
            "--json",
        )
    )
    t = ApiToken.objects.get(pk=created["id"])
    assert (t.can_write, t.can_admin, t.can_read) == (True, True, False)
    assert (t.group_id, t.may_set_group, created["group"]) == ("r1", True, "r1")
    plain = json.loads(
        run("create", "--name", "old", "--queues", "*", "--no-group-jobs", "--json")
    )
    assert plain["group"] is None
    listing = {r["name"]: r for r in json.loads(run("list", "--json"))}
    assert listing["reseller"]["scope"] == "write,admin"
    assert listing["old"]["group"] is None
    with pytest.raises(CommandError):
        run("create", "--name", "x", "--queues", "*", "--group", "a:b")


def test_admin_form_sets_the_group_fields(admin_client: Client, qname: str) -> None:
    """The admin's token form takes the group fields and lists the group."""
    response = admin_client.post(
        "/admin/bullpen_api/apitoken/add/",
        {
            "name": "viaadmin",
            "queues": qname,
            "can_read": "on",
            "can_write": "on",
            "group_jobs": "on",
            "group": "team-a",
            "may_set_group": "on",
        },
    )
    assert response.status_code == 302, response.content
    t = ApiToken.objects.get(name="viaadmin")
    assert (t.group_id, t.may_set_group, t.can_admin) == ("team-a", True, False)
    listed = admin_client.get("/admin/bullpen_api/apitoken/").content.decode()
    assert "team-a/" in listed
