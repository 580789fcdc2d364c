"""Tokens from `manage.py apitoken` and the Django admin; subscriptions
mirrored to Redis; the OpenAPI document matches the routes."""

from __future__ import annotations

import io
import json
from typing import Any

import orjson
import pytest
import redis
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from dashboard.api.models import ApiToken, WebhookSubscription
from dashboard.api.operations import registered
from tests.api.conftest import ApiClient


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("apitoken", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_apitoken_create_list_revoke(qname: str) -> None:
    """create prints the token once (JSON here), list shows it without the
    secret part, revoke makes it unusable."""
    created = json.loads(
        run(
            "create",
            "--name",
            "shop",
            "--queues",
            qname,
            "--scope",
            "read,write",
            "--rate-limit",
            "30",
            "--json",
        )
    )
    token = ApiToken.objects.get(pk=created["id"])
    assert token.can_read and token.can_write and token.rate_limit_per_min == 30
    assert ApiClient(created["token"]).get(f"/api/v1/queues/{qname}").status_code == 200
    listing = json.loads(run("list", "--json"))
    assert (
        listing[0]["prefix"] == created["prefix"]
        and listing[0]["scope"] == "read,write"
    )
    assert created["token"] not in run("list")
    assert "revoked" in run("revoke", created["prefix"])
    response = ApiClient(created["token"]).get(f"/api/v1/queues/{qname}")
    assert response.json()["error"]["code"] == "revoked_token"
    plain = run("create", "--name", "ro", "--queues", "*")
    assert "token:" in plain and "webhook secret:" in plain


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args",
    [
        ["create", "--name", "x", "--queues", "a b"],
        ["create", "--name", "x", "--queues", "a", "--scope", "root"],
        ["revoke", "bp_nothing"],
    ],
)
def test_apitoken_refuses_bad_input(args: list[str]) -> None:
    with pytest.raises(CommandError):
        run(*args)


@pytest.mark.django_db
def test_admin_creates_a_token_and_shows_it_once(
    admin_client: Client, qname: str
) -> None:
    """Adding a token in the admin stores its hash and shows the plain token
    in a message, once."""
    response = admin_client.post(
        "/admin/bullpen_api/apitoken/add/",
        {
            "name": "from-admin",
            "queues": qname,
            "can_read": "on",
            "can_write": "on",
            "rate_limit_per_min": "",
            "revoked_at_0": "",
            "revoked_at_1": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    text = response.content.decode()
    token = ApiToken.objects.get(name="from-admin")
    plain = text[text.index(token.prefix + "_") :].split(" ")[0]
    assert ApiClient(plain).get(f"/api/v1/queues/{qname}").status_code == 200
    page = admin_client.get(f"/admin/bullpen_api/apitoken/{token.pk}/change/")
    assert plain not in page.content.decode()
    admin_client.post(
        "/admin/bullpen_api/apitoken/",
        {"action": "revoke", "_selected_action": [str(token.pk)]},
    )
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


@pytest.mark.django_db
def test_subscriptions_are_mirrored_for_the_dispatcher(
    admin_client: Client, qname: str, r: redis.Redis, settings: Any
) -> None:
    """Saving a subscription in the admin writes it to Redis and creates the
    consumer group on its queue's events stream; deleting removes it; a
    private URL is refused by the form unless allowed."""
    form = {
        "queue": qname,
        "url": "http://10.0.0.9/hook",
        "events": "completed,failed",
        "secret": "whsec_x",
        "active": "on",
    }
    refused = admin_client.post("/admin/bullpen_api/webhooksubscription/add/", form)
    assert refused.status_code == 200 and "public" in refused.content.decode()
    form["url"] = "https://hooks.example.com/bullpen"
    admin_client.post("/admin/bullpen_api/webhooksubscription/add/", form)
    sub = WebhookSubscription.objects.get()
    mirrored = orjson.loads(r.hget("bullpen:wh:subs", str(sub.pk)))
    assert mirrored["url"] == form["url"] and mirrored["events"] == [
        "completed",
        "failed",
    ]
    assert r.xinfo_groups(f"bull:{qname}:events")[0]["name"] == "bullpen-webhooks"
    admin_client.post(
        f"/admin/bullpen_api/webhooksubscription/{sub.pk}/delete/", {"post": "yes"}
    )
    assert r.hget("bullpen:wh:subs", str(sub.pk)) is None


@pytest.mark.django_db
def test_runwebhooks_resyncs_the_mirror(r: redis.Redis, qname: str) -> None:
    """The dispatcher's start rebuilds the mirror from the database."""
    from dashboard.api.signals import sync_all

    sub = WebhookSubscription.objects.create(queue=qname, url="https://e.example/h")
    r.delete("bullpen:wh:subs")
    r.hset("bullpen:wh:subs", "999", "{}")
    assert sync_all() == 1
    assert set(r.hkeys("bullpen:wh:subs")) == {str(sub.pk)}


def _api_routes() -> set[str]:
    routes: set[str] = set()

    def walk(patterns: list[Any], prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                # A group id may hold "/": its route takes a path converter.
                routes.add(prefix + str(p.pattern).replace("<path:", "<str:"))

    walk(get_resolver().url_patterns, "")
    return {r for r in routes if r.startswith("api/v1/") and "(?P<rest>" not in r}


def test_every_route_is_documented_and_every_documented_path_routes() -> None:
    """The URLconf's API routes are exactly the document's paths, and each
    documented method answers something other than 404/405 for its path."""
    doc = Client().get("/api/v1/openapi.json").json()
    documented = {
        "api/v1/" + p.lstrip("/").replace("{", "<str:").replace("}", ">")
        for p in doc["paths"]
    }
    assert _api_routes() == documented
    assert {(op.method.lower(), op.path) for op in registered()} == {
        (method, path) for path, item in doc["paths"].items() for method in item
    }


@pytest.mark.django_db
def test_documented_operations_exist(api: ApiClient, qname: str) -> None:
    """Each documented operation, called on a missing job, answers from its
    view (a JSON 2xx or 404 job_not_found), never a routing 404/405."""
    doc = Client().get("/api/v1/openapi.json").json()
    for path, item in doc["paths"].items():
        url = "/api/v1" + path.replace("{queue}", qname).replace("{job_id}", "nojob")
        for method in item:
            if method == "post":
                response = api.post_json(url, {"name": "a"})
            else:
                response = getattr(api, method)(url)
            code = (
                response.json()["error"]["code"] if response.status_code >= 400 else ""
            )
            assert code not in ("not_found", "method_not_allowed"), (method, path)
