"""The GPU page against a real supervisor (`python -m gpu_workers`) on two
simulated 24 GiB GPUs: committed VRAM shows in the gauge while a job runs, and
scaling 1 -> 2 workers from the page starts the second worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client

from gpu_workers import Fleet
from queues import Queue
from tests.dashboard.helpers import HX, ready_workers, simulated_supervisor
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db


@pytest.fixture
def supervisor(dashboard_redis: str) -> Iterator[Fleet]:
    """A supervisor of host `itest` working queue `gpu` with one worker at first."""
    with simulated_supervisor(dashboard_redis, "itest", "gpu") as fleet:
        yield fleet


def test_gauge_and_scaling_with_a_real_supervisor(
    supervisor: Fleet, dashboard_redis: str, scaler_client: Client
) -> None:
    """A running 6 GiB job is committed on its GPU's gauge with live progress;
    asking for 2 workers brings the second one up on the other GPU."""
    wait_until(lambda: len(ready_workers(supervisor)) == 1, 15)
    q = Queue("gpu", dashboard_redis)
    job = q.add("demo", {"vram": "6GiB", "steps": 40, "step_s": 0.1})
    wait_until(lambda: any(w["running"] for w in supervisor.list_workers()), 15)
    body = scaler_client.get("/gpus/").content.decode()
    assert body.count("simulated") >= 3  # the host and both devices
    assert "SIM-itest-0" in body and "SIM-itest-1" in body
    assert "6.0 GiB</span> committed" in body
    assert f'data-live-progress="bull:gpu:{job.id}"' in body
    assert 'data-scale="itest/bull:gpu"' in body

    response = scaler_client.post(
        "/gpus/actions/scale/",
        {"host": "itest", "queue": "bull:gpu", "workers": "2"},
        **HX,
    )
    assert response.status_code == 200
    workers = wait_until(
        lambda: len(ready_workers(supervisor)) == 2 and ready_workers(supervisor), 15
    )
    assert {w["gpu"]["uuid"] for w in workers} == {"SIM-itest-0", "SIM-itest-1"}
    hosts = scaler_client.get("/gpus/fragments/hosts/").content.decode()
    assert hosts.count('class="gpu-worker"') == 2
    q.close()
