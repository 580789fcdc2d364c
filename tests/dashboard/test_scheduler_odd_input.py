"""Odd scheduler input from the page: options Bullpen stamps itself (tenant)
are refused on create, edit and run now; numbers beyond what Redis and Node
hold answer 400 naming the field; ids with control characters are refused at
creation, and one another client made can still be removed."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from django.test import Client
from django.urls import reverse

from queues import Queue, codec, ops
from tests.dashboard.helpers import hx_post

pytestmark = pytest.mark.django_db

HUGE = str(10**30)


def act(q: Queue, sid: str, verb: str) -> str:
    """An action on one scheduler of q."""
    return reverse("bullpen:scheduler-action", args=[q.prefix, q.name, sid, verb])


def create_url(q: Queue) -> str:
    """The create action of q's schedulers."""
    return reverse("bullpen:scheduler-create", args=[q.prefix, q.name])


def snapshot(q: Queue) -> list[dict[str, Any]]:
    """Every scheduler of q, to compare before and after."""
    return [s.to_dict() for s in q.get_job_schedulers(asc=True)]


@pytest.mark.parametrize(
    "opts", [{"tenant": "acme-corp"}, {"attempts": 2, "tenant": "acme-corp"}]
)
def test_tenant_in_template_opts_is_refused(
    dashboard_redis: str, operator_client: Client, qname: str, opts: dict[str, Any]
) -> None:
    """Create and edit refuse `tenant` in the opts, naming it; nothing changes."""
    q = Queue(qname, dashboard_redis)
    q.upsert_job_scheduler("keep", every_ms=5000)
    before = snapshot(q)
    form = {"scheduler_id": "new", "every_ms": "5000", "job_opts": json.dumps(opts)}
    for url in (create_url(q), act(q, "keep", "edit")):
        response = hx_post(operator_client, url, form)
        assert response.status_code == 400, (url, response.content)
        assert "tenant" in response.content.decode()
        assert snapshot(q) == before


def test_run_now_refuses_a_stored_tenant(
    dashboard_redis: str, operator_client: Client, qname: str
) -> None:
    """A scheduler stored with opts.tenant (written straight into Redis)
    cannot bill that tenant through "run now"."""
    q = Queue(qname, dashboard_redis)
    q.upsert_job_scheduler("s", every_ms=5000, template={"opts": {"attempts": 2}})
    r = redis.Redis.from_url(dashboard_redis, decode_responses=True)
    r.hset(
        q.keys.scheduler("s"),
        "opts",
        codec.dumps({"attempts": 2, "tenant": "acme-corp"}),
    )
    r.close()
    counts = q.get_counts("waiting", "delayed")
    response = hx_post(operator_client, act(q, "s", "run"))
    assert response.status_code == 400 and b"tenant" in response.content
    assert q.get_counts("waiting", "delayed") == counts


@pytest.mark.parametrize(
    ("field", "extra"),
    [
        ("every_ms", {}),
        ("limit", {"every_ms": "5000"}),
        ("start_date_ms", {"every_ms": "5000"}),
        ("end_date_ms", {"every_ms": "5000"}),
        ("offset_ms", {"every_ms": "5000"}),
        ("start_date_ms", {"pattern": "0 * * * * *"}),
        ("end_date_ms", {"pattern": "0 * * * * *"}),
    ],
)
def test_numbers_beyond_range_answer_400_naming_the_field(
    dashboard_redis: str,
    operator_client: Client,
    qname: str,
    field: str,
    extra: dict[str, str],
) -> None:
    """10**30 in any number field is a 400 that names the field, on create
    and on edit, and changes nothing."""
    q = Queue(qname, dashboard_redis)
    q.upsert_job_scheduler("keep", every_ms=5000)
    before = snapshot(q)
    form = {"scheduler_id": "big", **extra, field: HUGE}
    for url in (create_url(q), act(q, "keep", "edit")):
        response = hx_post(operator_client, url, form)
        assert response.status_code == 400, (url, response.content)
        assert field in response.content.decode()
        assert snapshot(q) == before


@pytest.mark.parametrize("sid", ["a\nb", "a\rb", "tab\there", "nul\x00", "ls\u2028x"])
def test_ids_with_control_characters_are_refused(
    dashboard_redis: str, operator_client: Client, qname: str, sid: str
) -> None:
    """An id holding a line break or another control character is refused."""
    q = Queue(qname, dashboard_redis)
    q.add("seed", {})
    form = {"scheduler_id": sid, "every_ms": "5000"}
    response = hx_post(operator_client, create_url(q), form)
    assert response.status_code == 400, response.content
    assert "scheduler_id" in response.content.decode()
    assert q.get_job_schedulers_count() == 0


def test_an_odd_id_made_by_another_client_can_be_removed(
    dashboard_redis: str, operator_client: Client, qname: str
) -> None:
    """A scheduler whose id holds a newline, written straight into Redis as
    BullMQ stores it, shows on the page and its Remove works."""
    q = Queue(qname, dashboard_redis)
    q.add("seed", {})
    sid = "night\nly"
    nxt = ops.now_ms() + 60_000
    r = redis.Redis.from_url(dashboard_redis, decode_responses=True)
    r.zadd(q.keys.repeat, {sid: nxt})
    r.hset(
        q.keys.scheduler(sid),
        mapping={"name": "n", "every": "60000", "ic": "1", "data": "{}"},
    )
    r.close()
    page = reverse("bullpen:schedulers", args=[q.prefix, q.name])
    assert "1 scheduler" in operator_client.get(page).content.decode()
    response = hx_post(operator_client, act(q, sid, "remove"))
    assert response.status_code == 200, response.content
    assert q.get_job_scheduler(sid) is None and q.get_job_schedulers_count() == 0
