"""Models in /metrics (issue 24): loads, evictions, failures, the load-time
histogram, resident models and bytes per GPU and model, labels bounded per
GPU, and a GPU process serving several queues counted once. Real Redis,
real Django; records as in test_gpu_models.py."""

from __future__ import annotations

import json

import pytest
import redis
from django.test import Client

from gpu_workers.clock import now_ms
from tests.dashboard.helpers import GiB
from tests.dashboard.test_gpu_models import (
    MODEL_WORKER_SEGMENTS,
    UUID,
    host,
    model_worker,
    page,
    segments,
)
from tests.dashboard.test_metrics import samples, scrape, value

pytestmark = pytest.mark.django_db


def test_metrics_per_gpu_and_model(dashboard_redis: str, r: redis.Redis) -> None:
    """Loads, evictions, failures, the load-time histogram (buckets, sum,
    loads as count), resident count and bytes, parsed by prometheus_client;
    two workers on one GPU are summed; an odd record and an old one add
    nothing and break nothing."""
    host(r)
    model_worker(r)
    second = model_worker(
        r,
        id="h1:bull:other:SIM-h1-0",
        queue="other",
        models=[{"name": "flux", "state": "resident", "weights_bytes": 6 * GiB}],
        model_counters={
            "flux": {
                "loads": 1,
                "load_seconds_sum": 4.0,
                "load_seconds_buckets": [0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
                "evictions": 1,
            }
        },
    )
    assert second["gpu"]["uuid"] == UUID
    model_worker(r, id="odd", gpu={"uuid": "GPU-odd"}, models=[{"name": 3}])
    model_worker(r, id="old", gpu={"uuid": "GPU-old"}, models=None)
    r.set(
        "bullpen:worker:old",
        json.dumps({"id": "old", "gpu": {"uuid": "GPU-old"}, "ts_ms": now_ms()}),
    )
    families = scrape()
    flux = {"gpu": UUID, "model": "flux"}
    assert value(families["bullpen_model_loads"], **flux) == 4
    assert value(families["bullpen_model_evictions"], **flux) == 3
    assert value(families["bullpen_model_load_failures"], **flux) == 1
    assert value(families["bullpen_model_load_ooms"], gpu=UUID, model="sdxl") == 1
    hist = families["bullpen_model_load_seconds"]
    buckets = {
        s.labels["le"]: s.value
        for s in samples(hist, **flux)
        if s.name.endswith("_bucket")
    }
    assert buckets == {
        "1.0": 0,
        "2.5": 0,
        "5.0": 1,
        "10.0": 2,
        "20.0": 4,
        "40.0": 4,
        "60.0": 4,
        "120.0": 4,
        "300.0": 4,
        "+Inf": 4,
    }
    assert value(hist, "bullpen_model_load_seconds_count", **flux) == 4
    assert value(hist, "bullpen_model_load_seconds_sum", **flux) == 40.0
    assert value(families["bullpen_models_resident"], gpu=UUID) == 4
    held = families["bullpen_model_resident_bytes"]
    assert value(held, **flux) == 12 * GiB
    assert value(held, gpu=UUID, model="llama") == 3 * GiB
    gpus = {
        s.labels["gpu"]
        for f in families.values()
        for s in f.samples
        if f.name.startswith("bullpen_model") and "gpu" in s.labels
    }
    assert gpus == {UUID}


def test_metrics_cap_models_per_gpu(dashboard_redis: str, r: redis.Redis) -> None:
    """20 models on a GPU: 16 labels by name, the other 4 summed as (other)."""
    host(r)
    models = [
        {"name": f"m{i:02d}", "state": "resident", "weights_bytes": 2**20}
        for i in range(20)
    ]
    counters = {f"m{i:02d}": {"loads": 1, "load_seconds_sum": 1.0} for i in range(20)}
    model_worker(r, models=models, model_counters=counters)
    families = scrape()
    loads = families["bullpen_model_loads"]
    names = sorted(
        s.labels["model"] for s in loads.samples if s.name.endswith("_total")
    )
    assert names == sorted([*(f"m{i:02d}" for i in range(16)), "(other)"])
    assert value(loads, "bullpen_model_loads_total", gpu=UUID, model="(other)") == 4
    held = families["bullpen_model_resident_bytes"]
    assert value(held, gpu=UUID, model="(other)") == 4 * 2**20


def test_a_gpu_process_serving_two_queues_counts_once(
    dashboard_redis: str, r: redis.Redis, viewer_client: Client
) -> None:
    """With one process per GPU, each queue's record carries the process's
    models and counters: the bar and /metrics count that process once."""
    host(r)
    process = {"pid": 4242, "queues": ["bull:gpu", "bull:other"]}
    model_worker(r, pid=4242, process=process)
    model_worker(
        r, id="h1:bull:other:SIM-h1-0", queue="other", pid=4242, process=process
    )
    assert segments(page(viewer_client)) == MODEL_WORKER_SEGMENTS
    families = scrape()
    flux = {"gpu": UUID, "model": "flux"}
    assert value(families["bullpen_model_loads"], **flux) == 3  # not 6
    assert value(families["bullpen_models_resident"], gpu=UUID) == 3
    assert value(families["bullpen_model_resident_bytes"], **flux) == 6 * GiB
