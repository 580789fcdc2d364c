"""GPU-time budgets of groups on the dashboard (docs/groups.md, quotas): the
groups table and a group's page show the budget, today's use and whether it
is used up; the `budget` action (scale) sets or clears it, audited and
validated, refused on a read-only queue; raising it releases a quota hold.

Today's use is written where a GPU worker adds it (the day's usage hash of
gpu_workers/quota.py), so no worker runs here."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from django.test import Client

from dashboard.console.models import AuditEntry
from gpu_workers.quota import QUOTA_HOLD, Quotas
from queues import Queue
from tests.dashboard.conftest import client_for, user_in
from tests.dashboard.helpers import hx_post, queue_url
from tests.dashboard.test_groups_page import add_groups, audit, group_url, groups_url
from tests.helpers import use_gpu_seconds

pytestmark = pytest.mark.django_db

use = use_gpu_seconds


def said() -> str:
    """What the last audit row says (the action's message)."""
    return str(AuditEntry.objects.order_by("-id").values_list("detail", flat=True)[0])


def quota_cells(html: str) -> dict[str, tuple[str, str, str]]:
    """Each row's (budget, used, exhausted) data attributes, by group."""
    found = re.findall(
        r'<tr data-group="([^"]+)".*?data-field="quota" data-budget="([^"]*)" '
        r'data-used="([^"]*)" data-exhausted="([^"]*)"',
        html,
        re.S,
    )
    return {g: (budget, used, spent) for g, budget, used, spent in found}


def test_table_and_page_show_budget_and_use(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """Rows on the groups page and the queue page's panel show each group's
    use today over its budget ("none" without one); a group past its budget
    is marked exhausted and its page says until when its jobs wait."""
    q = Queue(qname, dashboard_redis)
    r = redis.Redis.from_url(dashboard_redis, decode_responses=True)
    add_groups(q, {"acme": 2, "free": 1, "spent": 1})
    quotas = Quotas(r)
    quotas.set_budget(q.keys, "acme", 3600)
    use(r, q, "acme", 12.5)
    use(r, q, "spent", 30)
    quota = quotas.set_budget(q.keys, "spent", 20)  # past it: held at once
    assert quota.exhausted and q.get_group("spent").hold == QUOTA_HOLD
    for url in (groups_url(q), queue_url(q)):
        cells = quota_cells(admin_client.get(url).content.decode())
        assert cells == {
            "acme": ("3600", "12.500", "no"),
            "free": ("", "0.000", "no"),
            "spent": ("20", "30.000", "yes"),
        }, url
    page = admin_client.get(group_url(q, "spent")).content.decode()
    assert re.search(r'data-field="budget">20 GPU-s<', page)
    assert re.search(r'data-field="used">30 GPU-s<', page)
    assert "its jobs wait until" in page and "held: quota" in page
    free = admin_client.get(group_url(q, "free")).content.decode()
    assert 'data-field="budget">none<' in free
    assert 'data-field="exhausted">no<' in free
    r.close()


def test_set_and_clear_are_audited_and_need_scale(
    dashboard_redis: str, qname: str
) -> None:
    """A viewer and an operator are refused (denied in the audit); a scaler
    sets a budget and a blank one clears it, each audited on the group."""
    q = Queue(qname, dashboard_redis)
    r = redis.Redis.from_url(dashboard_redis, decode_responses=True)
    add_groups(q, {"acme": 1})
    url = group_url(q, "acme", "budget")
    for role in ("viewer", "operator"):
        assert (
            hx_post(client_for(user_in(role)), url, {"budget_s": "5"}).status_code
            == 403
        )
    quotas = Quotas(r)
    assert quotas.get_budget(q.keys, "acme") is None
    scaler = client_for(user_in("scaler"))
    done = hx_post(scaler, url, {"budget_s": "90.5", "next": groups_url(q)})
    assert done.status_code == 200 and done["HX-Redirect"] == groups_url(q)
    assert quotas.get_budget(q.keys, "acme") == 90.5
    page = scaler.get(group_url(q, "acme")).content.decode()
    assert 'data-group-action="budget"' in page and 'value="90.5"' in page
    assert hx_post(scaler, url, {"budget_s": ""}).status_code == 200
    assert quotas.get_budget(q.keys, "acme") is None
    target = f"bull:{qname}:acme"
    assert audit() == [
        (target, "group.budget", "denied"),
        (target, "group.budget", "denied"),
        (target, "group.budget", "ok"),
        (target, "group.budget", "ok"),
    ]
    r.close()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("-1", "greater than or equal to 0"),
        ("lots", "give a number of GPU-seconds"),
        ("nan", "give a number of GPU-seconds"),
        ("1e12", "less than or equal to"),
    ],
)
def test_bad_budgets_are_refused(
    dashboard_redis: str, admin_client: Client, qname: str, value: str, problem: str
) -> None:
    """A negative, non-number or too big budget is a 400 saying what is
    wrong, audited as an error; the budget stays as it was."""
    q = Queue(qname, dashboard_redis)
    r = redis.Redis.from_url(dashboard_redis, decode_responses=True)
    add_groups(q, {"acme": 1})
    Quotas(r).set_budget(q.keys, "acme", 60)
    response = hx_post(
        admin_client, group_url(q, "acme", "budget"), {"budget_s": value}
    )
    assert response.status_code == 400
    assert problem in response.content.decode()
    assert Quotas(r).get_budget(q.keys, "acme") == 60
    assert audit() == [(f"bull:{qname}:acme", "group.budget", "error")]
    r.close()


def test_raising_the_budget_releases_the_quota_hold(
    dashboard_redis: str, admin_client: Client, qname: str
) -> None:
    """A group held for its used-up budget is released at once when the
    budget is raised above today's use (the message says so); lowering it
    under the use holds the group again until the day turns."""
    q = Queue(qname, dashboard_redis)
    r = redis.Redis.from_url(dashboard_redis, decode_responses=True)
    add_groups(q, {"acme": 2})
    use(r, q, "acme", 40)
    Quotas(r).set_budget(q.keys, "acme", 30)
    held = q.get_group("acme")
    assert held.hold == QUOTA_HOLD and held.hold_until_ms is not None
    url = group_url(q, "acme", "budget")
    assert hx_post(admin_client, url, {"budget_s": "100"}).status_code == 200
    assert "quota hold is released" in said()
    assert not q.get_group("acme").hold
    page = admin_client.get(group_url(q, "acme")).content.decode()
    assert "held: quota" not in page and 'data-field="exhausted">no<' in page
    assert hx_post(admin_client, url, {"budget_s": "10"}).status_code == 200
    assert "it is used up" in said()
    again = q.get_group("acme")
    assert again.hold == QUOTA_HOLD and again.hold_until_ms == held.hold_until_ms
    r.close()


def test_read_only_queue_refuses_budget(
    dashboard_redis: str, admin_client: Client, qname: str, settings: Any
) -> None:
    """On a read-only queue the budget form is not offered and a posted one
    is refused (audited), the budget unchanged."""
    settings.BULLPEN_READ_ONLY_QUEUES = [qname]
    q = Queue(qname, dashboard_redis)
    r = redis.Redis.from_url(dashboard_redis, decode_responses=True)
    add_groups(q, {"acme": 1})
    page = admin_client.get(group_url(q, "acme")).content.decode()
    assert 'data-field="budget">none<' in page
    assert 'data-group-action="budget"' not in page
    url = group_url(q, "acme", "budget")
    assert hx_post(admin_client, url, {"budget_s": "5"}).status_code == 403
    assert Quotas(r).get_budget(q.keys, "acme") is None
    assert audit() == [(f"bull:{qname}:acme", "group.budget", "denied")]
    r.close()
