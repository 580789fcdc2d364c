"""Models on the GPU page (issue 24): the stacked bar of resident weights,
working memory and free per GPU, loads and evictions, events, pins (who may,
audit, CSRF), records without or with odd model fields, and a claimed job's
`loading_model` reason on its page and in its list row. Real Redis, real
Django; heartbeats as the residency worker writes them (design24.md)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import redis
from django.test import Client
from django.urls import reverse

from dashboard.console.models import AuditEntry
from gpu_workers import Fleet
from gpu_workers.clock import now_ms
from gpu_workers.exceptions import ValidationError
from gpu_workers.fleet import PINS_PER_GPU
from queues import Queue
from tests.dashboard.conftest import client_for, user_in
from tests.dashboard.helpers import HX, SIM_GPU, GiB, beat, job_url, make_active

pytestmark = pytest.mark.django_db

UUID = SIM_GPU["uuid"]


def host(r: redis.Redis) -> None:
    """Host h1 with the simulated 24 GiB GPU."""
    beat(
        r,
        "host",
        "h1",
        {
            "host": "h1",
            "state": "running",
            "mode": "simulated",
            "simulated": True,
            "gpus": [SIM_GPU],
            "queues": {},
            "ts_ms": now_ms(),
        },
    )


def model_worker(r: redis.Redis, **fields: Any) -> dict[str, Any]:
    """A worker on the GPU with 20 GiB of budget: flux (6 GiB, 1 user) and
    sdxl (7 GiB, pinned) resident, llama (3 GiB) loading, two running jobs of
    2 and 1.5 GiB working memory; `fields` override the record's."""
    record: dict[str, Any] = {
        "id": "h1:bull:gpu:SIM-h1-0",
        "host": "h1",
        "queue": "gpu",
        "prefix": "bull",
        "gpu": dict(SIM_GPU),
        "simulated": True,
        "slots": 3,
        "budget_bytes": 20 * GiB,
        "models": [
            {
                "name": "flux",
                "state": "resident",
                "weights_bytes": 6 * GiB,
                "since_ms": 1,
                "last_used_ms": 2,
                "users": 1,
                "pinned": False,
                "wanted": True,
            },
            {
                "name": "sdxl",
                "state": "resident",
                "weights_bytes": 7 * GiB,
                "since_ms": 1,
                "last_used_ms": 2,
                "users": 0,
                "pinned": True,
                "wanted": True,
            },
            {
                "name": "llama",
                "state": "loading",
                "weights_bytes": 3 * GiB,
                "since_ms": 1,
                "last_used_ms": 2,
                "users": 0,
                "pinned": False,
                "wanted": False,
            },
        ],
        "weights_bytes": 16 * GiB,
        "working_bytes": 2 * GiB + 3 * GiB // 2,
        "committed_bytes": 16 * GiB + 2 * GiB + 3 * GiB // 2,
        "free_bytes": GiB // 2,
        "model_counters": {
            "flux": {
                "loads": 3,
                "load_seconds_sum": 36.0,
                "load_seconds_buckets": [0, 0, 0, 1, 3, 3, 3, 3, 3, 3],
                "load_failures": 1,
                "load_ooms": 0,
                "evictions": 2,
                "jobs": 40,
            },
            "sdxl": {
                "loads": 1,
                "load_seconds_sum": 20.0,
                "load_seconds_buckets": [0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
                "load_failures": 0,
                "load_ooms": 1,
                "evictions": 0,
                "jobs": 5,
            },
        },
        "running": [
            {
                "id": "1",
                "name": "gen",
                "model": "flux",
                "working_bytes": 2 * GiB,
                "state": "running",
                "declared_bytes": 2 * GiB,
            },
            {
                "id": "2",
                "name": "gen",
                "model": "llama",
                "working_bytes": 3 * GiB // 2,
                "state": "loading_model",
                "loading": {"model": "llama", "since_ms": now_ms(), "expected_s": 9},
            },
        ],
        "counters": {"processed": 1},
        "state": "busy",
        "ts_ms": now_ms(),
    }
    record.update(fields)
    beat(r, "worker", record["id"], record)
    return record


#: The bar of model_worker()'s record: a segment per model (largest first),
#: working memory, free to the budget.
MODEL_WORKER_SEGMENTS = [
    ("model", "sdxl", 7 * GiB),
    ("model", "flux", 6 * GiB),
    ("model", "llama", 3 * GiB),
    ("working", "", 2 * GiB + 3 * GiB // 2),
    ("free", "", 20 * GiB - 16 * GiB - 2 * GiB - 3 * GiB // 2),
]


def page(client: Client) -> str:
    response = client.get("/gpus/")
    assert response.status_code == 200
    return response.content.decode()


def segments(body: str) -> list[tuple[str, str, int]]:
    """(kind, model, bytes) of each bar segment, in order."""
    found = []
    for tag in re.findall(r"<span class=\"seg [^\"]*\"[^>]*>", body):
        if "data-segment" not in tag:
            continue  # a legend swatch
        kind = re.search(r'data-segment="(\w+)"', tag)
        model = re.search(r'data-model="([^"]+)"', tag)
        size = re.search(r'data-bytes="(\d+)"', tag)
        assert kind and size
        found.append((kind[1], model[1] if model else "", int(size[1])))
    return found


def test_bar_segments_have_the_right_bytes(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """2 resident models + 1 loading + 2 running jobs: a segment per model
    (largest first), working memory, free to the budget; exact numbers in
    the titles; the loading one marked, the pinned one carries the pin."""
    host(r)
    model_worker(r)
    body = page(viewer_client)
    working = 2 * GiB + 3 * GiB // 2
    assert segments(body) == MODEL_WORKER_SEGMENTS
    assert 'data-model="llama" data-model-state="loading"' in body
    assert re.search(r'class="seg model m\d loading"', body)
    assert re.search(r'data-model="sdxl" data-model-state="resident" data-pinned', body)
    assert f"sdxl: 7.0 GiB ({7 * GiB:,} bytes) weights, resident, pinned" in body
    assert f"running jobs&#x27; working memory: 3.5 GiB ({working:,} bytes)" in body
    widths = [
        float(w)
        for w in re.findall(r'data-segment="\w+"[^>]*data-bar-width="([\d.]+)"', body)
    ]
    assert widths == pytest.approx([35.0, 30.0, 15.0, 17.5, 2.5], abs=0.01)


def test_counters_and_events_per_gpu(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """Loads, mean load time, evictions, failures from model_counters; the
    newest events of this GPU's stream entries (another GPU's left out)."""
    host(r)
    model_worker(r)
    for i in range(8):
        r.xadd(
            "bullpen:models:events",
            {
                "gpu": UUID,
                "host": "h1",
                "worker": "w",
                "model": f"m{i}",
                "kind": "load",
                "seconds": "12.5",
                "bytes": str(GiB),
                "ts_ms": str(now_ms()),
            },
        )
    r.xadd(
        "bullpen:models:events",
        {"gpu": "GPU-other", "model": "m-of-another-gpu", "kind": "evict"},
    )
    r.xadd("bullpen:models:events", {"gpu": UUID, "model": "../x", "kind": "load"})
    body = page(viewer_client)
    row = body[body.index('data-model-counts="flux"') :]
    row = row[: row.index("</tr>")]
    cells = re.findall(r'<td class="num[^"]*">([^<]*)</td>', row)
    assert cells == ["3", "12.0 s", "2", "1", "0", "40"]
    events = re.findall(r'data-model-event="(\w+)">\w+ <strong>([^<]+)</strong>', body)
    assert events == [("load", f"m{i}") for i in (7, 6, 5, 4, 3)]
    # (a name no random token on the page can contain, as "zz" once did)
    assert "m-of-another-gpu" not in body and "../x" not in body


def test_old_workers_show_no_bar(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """A record without model fields (a worker from before models): the card
    renders as before, with no bar and no error."""
    host(r)
    record = model_worker(r)
    for key in ("models", "weights_bytes", "working_bytes", "model_counters"):
        record.pop(key)
    beat(r, "worker", record["id"], record)
    body = page(viewer_client)
    assert segments(body) == [] and "data-model-error" not in body
    assert 'data-gpu="SIM-h1-0"' in body


@pytest.mark.parametrize(
    "fields",
    [
        {"models": "flux"},
        {"models": [{"name": "flux", "state": "resident", "weights_bytes": -1}]},
        {"models": [{"name": "<script>", "state": "resident", "weights_bytes": 1}]},
        {"models": [{"name": "flux", "state": "warm", "weights_bytes": 1}]},
        {"models": [{"name": "flux", "state": "resident", "weights_bytes": True}]},
        {"models": [None]},
        {"working_bytes": "lots"},
        {"model_counters": {"flux": {"loads": "3"}}},
        {"model_counters": {"flux": {"load_seconds_sum": "x"}}},
        {"model_counters": []},
    ],
)
def test_malformed_records_show_an_error_not_a_500(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client, fields: dict[str, Any]
) -> None:
    """A record with odd model fields: an error line on that GPU, the rest of
    the page (readings, workers) still there, nothing of it escaped badly."""
    host(r)
    model_worker(r, **fields)
    body = page(viewer_client)
    assert body.count("data-model-error") == 1
    assert segments(body) == []
    assert "<script>" not in body
    assert 'data-worker="h1:bull:gpu:SIM-h1-0"' in body
    fragment = viewer_client.get("/gpus/fragments/hosts/", **HX)
    assert fragment.status_code == 200


def test_many_models_are_capped(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """More than 16 models on a GPU: the 16 largest named, the rest summed."""
    host(r)
    models = [
        {"name": f"m{i:02d}", "state": "resident", "weights_bytes": (i + 1) * 2**20}
        for i in range(20)
    ]
    model_worker(r, models=models, working_bytes=0)
    found = [s for s in segments(page(viewer_client)) if s[0] == "model"]
    assert len(found) == 17 and found[-1] == ("model", "(other)", 10 * 2**20)


# --- pins -----------------------------------------------------------------------------
def test_fleet_pins(dashboard_redis: str, r: redis.Redis) -> None:
    """pin_model / unpin_model / pins() over models:pins, names validated,
    odd fields read as none, a cap per GPU."""
    fleet = Fleet(dashboard_redis)
    assert fleet.pin_model(UUID, "flux") == ["flux"]
    assert fleet.pin_model(UUID, "sdxl") == ["flux", "sdxl"]
    assert fleet.pin_model(UUID, "flux") == ["flux", "sdxl"]
    assert json.loads(r.hget("bullpen:models:pins", UUID) or "") == ["flux", "sdxl"]
    assert fleet.unpin_model(UUID, "flux") == ["sdxl"]
    for gpu, model in (("a:b", "flux"), (UUID, "../x"), (UUID, ""), ("", "flux")):
        with pytest.raises(ValidationError):
            fleet.pin_model(gpu, model)
    with pytest.raises(ValidationError, match="not pinned"):
        fleet.unpin_model(UUID, "flux")
    assert fleet.unpin_model(UUID, "sdxl") == []
    assert r.hexists("bullpen:models:pins", UUID) == 0
    r.hset("bullpen:models:pins", mapping={"G1": "{bad", "G2": '["ok", 3, "../x"]'})
    assert fleet.pins() == {"G2": ["ok"]}
    for i in range(PINS_PER_GPU):
        fleet.pin_model("G3", f"m{i}")
    with pytest.raises(ValidationError, match="unpin one first"):
        fleet.pin_model("G3", "one-more")


def test_scaler_pins_and_unpins_audited(
    dashboard_redis: str, r: redis.Redis, scaler_client: Client
) -> None:
    """The form pins a model (shown with its mark, an undeclared one said
    so) and unpins it; each is an audit row."""
    host(r)
    model_worker(r)
    body = page(scaler_client)
    assert 'action="/gpus/actions/pin/"' in body
    response = scaler_client.post(
        "/gpus/actions/pin/", {"gpu": UUID, "model": "ghost"}, **HX
    )
    assert response.status_code == 200 and response["HX-Trigger"] == "bullpen:changed"
    assert Fleet(dashboard_redis).pins() == {UUID: ["ghost"]}
    body = page(scaler_client)
    assert 'data-pin="ghost"' in body and "(no worker declares it)" in body
    plain = scaler_client.post("/gpus/actions/unpin/", {"gpu": UUID, "model": "ghost"})
    assert plain.status_code == 303 and plain["Location"] == "/gpus/"
    assert Fleet(dashboard_redis).pins() == {}
    rows = list(
        AuditEntry.objects.order_by("id").values_list(
            "action", "target", "outcome", "username"
        )
    )
    assert rows == [
        ("models.pin", f"gpu:{UUID}", "ok", "u-scaler"),
        ("models.unpin", f"gpu:{UUID}", "ok", "u-scaler"),
    ]
    bad = scaler_client.post("/gpus/actions/pin/", {"gpu": UUID, "model": "a b"}, **HX)
    assert bad.status_code == 400 and "model name" in bad.content.decode()
    assert AuditEntry.objects.order_by("-id")[0].outcome == "error"
    assert scaler_client.get("/gpus/actions/pin/").status_code == 405


def test_viewer_and_operator_cannot_pin(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client, operator_client: Client
) -> None:
    """No scale permission: no form, a POST is 403 and a denied audit row."""
    host(r)
    model_worker(r)
    assert 'action="/gpus/actions/pin/"' not in page(viewer_client)
    for client in (viewer_client, operator_client):
        response = client.post("/gpus/actions/pin/", {"gpu": UUID, "model": "flux"})
        assert response.status_code == 403
    assert Fleet(dashboard_redis).pins() == {}
    assert list(AuditEntry.objects.values_list("outcome", flat=True)) == ["denied"] * 2


def test_pinning_needs_csrf(dashboard_redis: str, r: redis.Redis) -> None:
    """A cross-site post without the token is refused."""
    client = client_for(user_in("scaler"), enforce_csrf_checks=True)
    response = client.post("/gpus/actions/pin/", {"gpu": UUID, "model": "flux"})
    assert response.status_code == 403
    assert Fleet(dashboard_redis).pins() == {}


# --- loading_model on the pages -------------------------------------------------------
def test_job_page_and_row_say_loading_model(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """The claimed job the worker loads a model for: the job page's block and
    the active tab's row say loading_model, with a link to the GPU page."""
    q = Queue("gpu", dashboard_redis)
    job_id = make_active(q, "gen", {"model": "llama"})
    host(r)
    record = model_worker(r)
    record["running"][1]["id"] = job_id
    beat(r, "worker", record["id"], record)
    body = viewer_client.get(job_url(q, job_id)).content.decode()
    assert 'data-waiting-code="loading_model"' in body
    assert "Loading model llama on GPU SIM-h1-0 (h1)" in body
    assert 'href="/gpus/"' in body[body.index('id="waiting-reason"') :]
    url = reverse("bullpen:queue-jobs", args=["bull", "gpu"]) + "?state=active"
    rows = viewer_client.get(url, **HX).content.decode()
    assert "loading llama" in rows
