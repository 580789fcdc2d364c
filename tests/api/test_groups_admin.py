"""The groups admin operations (admin-scoped tokens): list a queue's groups
by backlog, paginated; read one (404 when unknown); change its settings
(null clears), pause and resume it; change the defaults. Every change is in
the audit log; bad input is a 400 and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.api.models import ApiToken
from dashboard.console.models import AuditEntry
from queues import Queue
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db


def client(name: str = "ops", admin: bool = True, queues: str = "*") -> ApiClient:
    _, plain = ApiToken.issue(name, queues, True, True, None, can_admin=admin)
    return ApiClient(plain)


def patch(api: ApiClient, path: str, body: Any) -> Any:
    import orjson

    return api.patch(
        path,
        orjson.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.token}",
    )


def fill(q: Queue, sizes: dict[str, int]) -> None:
    for group, size in sizes.items():
        q.add_bulk(
            [{"name": "j", "data": {}, "opts": {"group": group}} for _ in range(size)]
        )


def test_list_groups_largest_backlog_first_paginated(q: Queue) -> None:
    """get_groups order, offset/limit pages, the total count."""
    fill(q, {"small": 1, "big": 5, "mid/a": 3})
    api = client()
    base = f"/api/v1/queues/{q.name}/groups"
    body = api.get(base).json()
    assert body["total"] == 3 and body["offset"] == 0 and body["limit"] == 20
    assert [(g["id"], g["waiting"]) for g in body["groups"]] == [
        ("big", 5),
        ("mid/a", 3),
        ("small", 1),
    ]
    page = api.get(base + "?offset=1&limit=1").json()
    assert [g["id"] for g in page["groups"]] == ["mid/a"]
    for bad in ("limit=0", "limit=101", "offset=-1", "offset=x"):
        response = api.get(f"{base}?{bad}")
        assert response.status_code == 400, bad
        assert response.json()["error"]["code"] == "invalid_body"


def test_list_groups_whose_id_holds_a_text(q: Queue) -> None:
    """`contains` lists the matching groups, largest backlog first, `limit`
    of them with `total` counting every match; bad text and an offset with
    it are 400."""
    fill(q, {"acme/eu": 1, "acme/us": 3, "beta": 5, "xacme": 2})
    api = client()
    base = f"/api/v1/queues/{q.name}/groups"
    body = api.get(base + "?contains=acme").json()
    assert [(g["id"], g["waiting"]) for g in body["groups"]] == [
        ("acme/us", 3),
        ("xacme", 2),
        ("acme/eu", 1),
    ]
    assert body["total"] == 3 and body["complete"] is True
    top = api.get(base + "?contains=acme&limit=1").json()
    assert [g["id"] for g in top["groups"]] == ["acme/us"] and top["total"] == 3
    assert api.get(base + "?contains=zzz").json()["groups"] == []
    assert api.get(base).json()["complete"] is True
    bad = api.get(base + "?contains=a*")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_group"
    paged = api.get(base + "?contains=acme&offset=1")
    assert paged.status_code == 400
    assert paged.json()["error"]["code"] == "invalid_body"


def test_read_one_group_and_404(q: Queue) -> None:
    """A group with a '/' in its id reads by path; an unknown one is a 404;
    a bad id is a 400."""
    fill(q, {"mid/a": 2})
    api = client()
    body = api.get(f"/api/v1/queues/{q.name}/groups/mid/a").json()
    assert body["id"] == "mid/a" and body["waiting"] == 2 and body["paused"] is False
    assert body["state"] == "ready"
    missing = api.get(f"/api/v1/queues/{q.name}/groups/nobody")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "group_not_found"
    bad = api.get(f"/api/v1/queues/{q.name}/groups/a:b")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_group"


def test_set_clear_pause_resume_audited(q: Queue) -> None:
    """PATCH sets the settings sent (null clears), pauses and resumes; each
    change is an audit entry naming the token."""
    fill(q, {"acme": 1})
    api = client("ops-bot")
    url = f"/api/v1/queues/{q.name}/groups/acme"
    body = {"weight": 3, "concurrency": 2, "rate_max": 10, "rate_duration_ms": 1000}
    done = patch(api, url, body)
    assert done.status_code == 200, done.content
    shown = done.json()
    assert (shown["weight"], shown["concurrency"], shown["rate_max"]) == (3, 2, 10)
    assert shown["own"]["weight"] == 3
    info = q.get_group("acme")
    assert info is not None and (info.weight, info.concurrency) == (3, 2)
    cleared = patch(api, url, {"concurrency": None}).json()
    assert cleared["concurrency"] is None and cleared["own"]["concurrency"] is None
    assert cleared["weight"] == 3
    paused = patch(api, url, {"paused": True}).json()
    assert paused["paused"] is True and paused["state"] == "paused"
    info = q.get_group("acme")
    assert info is not None and info.paused
    assert patch(api, url, {"paused": False}).json()["paused"] is False
    entries = list(AuditEntry.objects.order_by("id"))
    assert [e.action for e in entries] == [
        "group.set",
        "group.set",
        "group.pause",
        "group.resume",
    ]
    assert all(
        e.outcome == "ok" and e.username.startswith("api:ops-bot (") for e in entries
    )
    assert all(e.target == f"bull:{q.name}" and "acme" in e.detail for e in entries)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"weight": 0},
        {"weight": "3"},
        {"concurrency": -1},
        {"rate_max": 1.5},
        {"paused": "yes"},
        {"colour": "red"},
        [1],
    ],
)
def test_bad_settings_are_400_and_change_nothing(q: Queue, body: Any) -> None:
    fill(q, {"acme": 1})
    response = patch(client(), f"/api/v1/queues/{q.name}/groups/acme", body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid_body"
    info = q.get_group("acme")
    assert info is not None and info.weight == 1 and not info.paused
    assert not AuditEntry.objects.exists()


def test_defaults_apply_to_groups_without_their_own(q: Queue) -> None:
    """PATCH group-defaults: a group that sets nothing takes them; audited."""
    fill(q, {"acme": 1})
    api = client()
    url = f"/api/v1/queues/{q.name}/group-defaults"
    done = patch(api, url, {"concurrency": 4})
    assert done.status_code == 200, done.content
    assert done.json()["defaults"]["concurrency"] == 4
    assert api.get(url).json()["defaults"]["concurrency"] == 4
    info = q.get_group("acme")
    assert info is not None and info.concurrency == 4
    entry = AuditEntry.objects.get()
    assert entry.action == "group.defaults" and "concurrency=4" in entry.detail
    assert (
        patch(api, url, {"concurrency": None}).json()["defaults"]["concurrency"] is None
    )


def test_only_admin_tokens_on_their_queues(q: Queue) -> None:
    """A read/write token without admin, or an admin token on other queues,
    gets a 403 and changes nothing."""
    fill(q, {"acme": 1})
    url = f"/api/v1/queues/{q.name}/groups/acme"
    for api, code in (
        (client("rw", admin=False), "insufficient_scope"),
        (client("other", queues="elsewhere"), "queue_not_allowed"),
    ):
        for response in (api.get(url), patch(api, url, {"paused": True})):
            assert response.status_code == 403
            assert response.json()["error"]["code"] == code
    info = q.get_group("acme")
    assert info is not None and not info.paused
