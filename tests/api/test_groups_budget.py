"""GPU-time budgets of groups in the HTTP API (docs/http-api.md): a group
(one, or a page of them) carries `quota: {budget_s, used_s, exhausted,
until_ms}`; PATCH `budget_s` sets it (null clears), audited as
`group.budget`, raising it releases a quota hold; bad values are a 400 that
changes nothing; only admin tokens may.

Today's use is written where a GPU worker adds it (the day's usage hash of
gpu_workers/quota.py), so no worker runs here."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from dashboard.console.models import AuditEntry
from gpu_workers.quota import QUOTA_HOLD, Quotas, next_midnight_ms
from queues import Queue
from tests.api.test_groups_admin import client, fill, patch
from tests.helpers import use_gpu_seconds

pytestmark = pytest.mark.django_db

use = use_gpu_seconds


def test_groups_carry_their_quota(q: Queue, r: redis.Redis) -> None:
    """One group and a page of groups show budget, use today, whether it is
    used up, and when the day ends; no budget is a null budget_s."""
    fill(q, {"acme": 2, "free": 1})
    use(r, q, "acme", 12.25)
    Quotas(r).set_budget(q.keys, "acme", 10)  # past it: held
    api = client()
    base = f"/api/v1/queues/{q.name}/groups"
    one = api.get(base + "/acme").json()
    assert one["quota"]["budget_s"] == 10 and one["quota"]["used_s"] == 12.25
    assert one["quota"]["exhausted"] is True and one["hold"] == QUOTA_HOLD
    until = one["quota"]["until_ms"]
    assert until in {next_midnight_ms(time.time()), next_midnight_ms(time.time() - 5)}
    page = {g["id"]: g["quota"] for g in api.get(base).json()["groups"]}
    assert page["acme"] == one["quota"]
    assert page["free"] == {
        "budget_s": None,
        "used_s": 0.0,
        "exhausted": False,
        "until_ms": until,
    }


def test_patch_sets_and_clears_a_budget_audited(q: Queue, r: redis.Redis) -> None:
    """budget_s sets the budget (the answer shows it), null clears it; a
    budget over today's use releases the quota hold at once; each change is
    a `group.budget` audit entry naming the token."""
    fill(q, {"acme": 1})
    use(r, q, "acme", 50)
    api = client("budget-bot")
    url = f"/api/v1/queues/{q.name}/groups/acme"
    held = patch(api, url, {"budget_s": 20})
    assert held.status_code == 200, held.content
    assert held.json()["quota"]["exhausted"] is True
    assert held.json()["hold"] == QUOTA_HOLD
    raised = patch(api, url, {"budget_s": 75.5}).json()
    assert raised["quota"]["budget_s"] == 75.5 and raised["quota"]["exhausted"] is False
    assert raised["hold"] is None
    info = q.get_group("acme")
    assert info is not None and not info.hold
    cleared = patch(api, url, {"budget_s": None}).json()
    assert cleared["quota"]["budget_s"] is None
    assert Quotas(r).get_budget(q.keys, "acme") is None
    entries = list(AuditEntry.objects.order_by("id"))
    assert [(e.action, e.outcome) for e in entries] == [("group.budget", "ok")] * 3
    assert all(e.username.startswith("api:budget-bot (") for e in entries)
    assert all(e.target == f"bull:{q.name}" and "acme" in e.detail for e in entries)
    assert [e.detail.rsplit("=", 1)[1] for e in entries] == ["20", "75.5", "None"]


def test_budget_with_settings_in_one_patch(q: Queue, r: redis.Redis) -> None:
    """budget_s goes with other fields in one body: each is audited."""
    fill(q, {"acme": 1})
    url = f"/api/v1/queues/{q.name}/groups/acme"
    done = patch(client(), url, {"weight": 2, "budget_s": 0})
    assert done.status_code == 200, done.content
    assert done.json()["weight"] == 2 and done.json()["quota"]["budget_s"] == 0
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["group.set", "group.budget"]


@pytest.mark.parametrize(
    "body",
    [
        {"budget_s": -1},
        {"budget_s": "60"},
        {"budget_s": True},
        {"budget_s": 1e12},
        {"budget_s": [60]},
    ],
)
def test_bad_budgets_are_400_and_change_nothing(
    q: Queue, r: redis.Redis, body: Any
) -> None:
    fill(q, {"acme": 1})
    Quotas(r).set_budget(q.keys, "acme", 60)
    response = patch(client(), f"/api/v1/queues/{q.name}/groups/acme", body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_body" and "budget_s" in error["message"]
    assert Quotas(r).get_budget(q.keys, "acme") == 60
    assert not AuditEntry.objects.exists()


def test_only_admin_tokens_set_budgets(q: Queue, r: redis.Redis) -> None:
    """A token without admin, or an admin token on other queues, gets a 403
    and the budget is not written."""
    fill(q, {"acme": 1})
    url = f"/api/v1/queues/{q.name}/groups/acme"
    for api, code in (
        (client("rw", admin=False), "insufficient_scope"),
        (client("other", queues="elsewhere"), "queue_not_allowed"),
    ):
        response = patch(api, url, {"budget_s": 5})
        assert response.status_code == 403
        assert response.json()["error"]["code"] == code
    assert Quotas(r).get_budget(q.keys, "acme") is None


def test_budget_for_a_group_without_jobs_yet(q: Queue, r: redis.Redis) -> None:
    """A budget may be given before the group's first job (as its settings)."""
    url = f"/api/v1/queues/{q.name}/groups/newco"
    done = patch(client(), url, {"budget_s": 5})
    assert done.status_code == 200, done.content
    assert done.json()["quota"]["budget_s"] == 5 and done.json()["waiting"] == 0
    assert Quotas(r).get_budget(q.keys, "newco") == 5
