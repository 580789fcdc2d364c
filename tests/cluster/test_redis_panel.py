"""The Redis page and the workers page on a 3-primary Redis Cluster: a panel
per primary, each with that primary's own INFO and keys, and a worker whose
queue sits on any primary listed once."""

from __future__ import annotations

import re
from contextlib import ExitStack

import pytest
from django.test import Client
from django.urls import reverse
from redis.cluster import RedisCluster

from tests.dashboard.conftest import (  # noqa: F401 (fixtures)
    dashboard_redis,
    fast_passwords,
    viewer_client,
)
from tests.dashboard.test_redis_panel import fields
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread

pytestmark = pytest.mark.usefixtures("dashboard_redis")


def test_a_panel_per_primary(viewer_client: Client, r: RedisCluster) -> None:  # noqa: F811
    """Every primary has its panel: its address, version and key count, and
    keys per prefix counted on that primary alone."""
    for i in range(30):
        r.set(f"k{i}:x", 1)  # spread over the slots, so over the primaries
    page = viewer_client.get(reverse("bullpen:redis")).content.decode()
    assert fields(page)["mode"] == "cluster"
    sections = re.findall(
        r'<section class="panel redis-server" data-node="([^"]+)"(.*?)</section>',
        page,
        re.S,
    )
    primaries = {f"{n.host}:{n.port}": n for n in r.get_primaries()}
    assert {node for node, _ in sections} == set(primaries)
    total = 0
    for node, body in sections:
        own = r.get_redis_connection(primaries[node])
        shown = fields(body)
        assert shown["redis_version"] == own.info("server")["redis_version"]
        assert shown["dbsize"] == str(own.dbsize())
        counted = sum(int(n) for n in re.findall(r'class="count">(\d+)<', body))
        assert counted == own.dbsize()
        total += counted
    assert total == 30


def _a_queue_per_primary(r: RedisCluster) -> list[str]:
    """Queue names with hash tags whose slots sit on each primary, one each."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < len(r.get_primaries()):
        name = "{wp" + str(i) + "}"
        found.setdefault(r.get_node_from_key(f"bull:{name}:marker").port, name)
        i += 1
    return list(found.values())


def test_workers_on_every_primary(viewer_client: Client, r: RedisCluster) -> None:  # noqa: F811
    """Workers of queues on each of the three primaries are each listed once."""
    names = _a_queue_per_primary(r)
    url = "redis+cluster://" + ",".join(f"{n.host}:{n.port}" for n in r.get_primaries())
    with ExitStack() as stack:
        for i, name in enumerate(names):
            stack.enter_context(worker_thread(name, _noop, url, worker_name=f"w-{i}"))

        def listed() -> str | None:
            page = viewer_client.get(reverse("bullpen:workers")).content.decode()
            return (
                page if all(f'data-worker="w-{i}"' in page for i in range(3)) else None
            )

        page = wait_until(listed, 20, what="the three workers listed")
    for i, name in enumerate(names):
        assert page.count(f'data-worker="w-{i}"') == 1
        assert f'data-queue="bull:{name}"' in page


def _noop(job: object) -> None:
    return None
