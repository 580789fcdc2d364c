"""Fixtures of the manifest tests: the metric names /metrics really exports."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dashboard import reads
from dashboard.metrics import BullpenCollector
from queues import Queue
from tests.dashboard.test_metrics import gpu_fleet


@pytest.fixture
def exported_metrics(
    settings: Any, redis_url: str, r: redis.Redis, q: Queue
) -> Iterator[set[str]]:
    """Family and sample names of one real collection over the test Redis,
    with a waiting job and a supervisor, worker and GPUs heartbeating (so the
    queue, worker and GPU families are all there)."""
    settings.REDIS_URL = redis_url
    settings.BULLPEN_DISCOVERY_TTL_S = 0
    reads.reset()
    q.add("job", {"n": 1})
    gpu_fleet(r)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BullpenCollector())
    names: set[str] = set()
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        names.add(family.name)
        names |= {sample.name for sample in family.samples}
    yield names
    reads.reset()
