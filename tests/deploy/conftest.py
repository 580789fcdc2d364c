"""Fixtures of the manifest tests: the metric names /metrics really exports."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dashboard.console import reads
from dashboard.console.metrics import BullpenCollector
from queues import Queue
from tests.dashboard.helpers import fill_every_family


@pytest.fixture
def exported_metrics(
    settings: Any, redis_url: str, r: redis.Redis, q: Queue
) -> Iterator[set[str]]:
    """Family and sample names of one real collection over the test Redis,
    under a state that brings out every family (fill_every_family)."""
    settings.REDIS_URL = redis_url
    settings.BULLPEN_DISCOVERY_TTL_S = 0
    reads.reset()
    fill_every_family(r, q)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BullpenCollector())
    names: set[str] = set()
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        names.add(family.name)
        names |= {sample.name for sample in family.samples}
    yield names
    reads.reset()
