"""A real Prometheus (Debian's `prometheus`) scrapes a running dashboard
(daphne) every second and evaluates deploy/prometheus/rules.yml: each alert
below fires once its situation is made for real, in Redis, and clears once
it ends.

The rules run as written (expressions and thresholds) except `for:`, set to
0s so that the test does not wait the minutes an alert must hold in
production (rules_test.yml checks those durations with promtool)."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from queues import Queue
from queues.devredis import RedisServer
from tests.dashboard.daphne_helpers import daphne
from tests.helpers import first_pick_taken, serve_logged, stop_process, wait_until
from tests.queues.worker.helpers import worker_thread

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules.yml"
PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="prometheus not found: install Debian's prometheus package (make test "
    "does, as root) to evaluate the alert rules on a real server",
)


class Prometheus:
    """A Prometheus server of the test and its HTTP API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=5) as reply:
            body = json.loads(reply.read())
        assert body["status"] == "success", body
        return body["data"]

    def firing(self) -> set[tuple[str, str]]:
        """(alertname, the queue, node or instance label) of firing alerts."""
        return {
            (
                a["labels"]["alertname"],
                a["labels"].get("queue") or a["labels"].get("node") or "",
            )
            for a in self.get("/api/v1/alerts")["alerts"]
            if a["state"] == "firing"
        }


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer
) -> Iterator[Prometheus]:
    """Prometheus scraping a daphne on the test Redis, rules with `for: 0s`
    (one for the module: each test's `redis_url` still flushes the db)."""
    tmp_path = tmp_path_factory.mktemp("prometheus")
    redis_url = redis_server.url
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "0s"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    with daphne(tmp_path, redis_url) as server:
        target = server.url.removeprefix("http://")
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yml"],
            "scrape_configs": [
                {
                    "job_name": "bullpen",
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": [target]}],
                }
            ],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        assert PROMETHEUS

        def argv(port: int) -> list[str]:
            return [
                str(PROMETHEUS),
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ]

        def scraped(port: int) -> bool:
            # (Only this Prometheus knows this target: no other process that
            # took the port could answer it.)
            try:
                targets = Prometheus(f"http://127.0.0.1:{port}").get("/api/v1/targets")[
                    "activeTargets"
                ]
            except OSError:
                return False
            return any(t["health"] == "up" for t in targets)

        proc, port = serve_logged(
            argv, tmp_path / "prometheus.log", answers=scraped, cwd=tmp_path
        )
        try:
            yield Prometheus(f"http://127.0.0.1:{port}")
        finally:
            stop_process(proc, 10)


def _fires(prom: Prometheus, *alerts: tuple[str, str]) -> None:
    wait_until(lambda: set(alerts) <= prom.firing(), 30, what=f"{alerts} to fire")


def _clears(prom: Prometheus, *alerts: tuple[str, str]) -> None:
    wait_until(lambda: not set(alerts) & prom.firing(), 30, what=f"{alerts} to clear")


def test_queue_alerts_fire_and_clear(
    prometheus: Prometheus, redis_url: str, qname: str
) -> None:
    """A job waiting for an hour with no worker: the no-worker and backlog-age
    alerts fire; a worker connects and completes it: both clear."""
    queue = Queue(qname, redis_url)
    key = f"bull:{qname}"
    queue.add("render", {}, timestamp=int(time.time() * 1000) - 3_600_000)
    no_worker, old = ("BullpenQueueNoWorker", key), ("BullpenBacklogOld", key)
    _fires(prometheus, no_worker, old)
    with worker_thread(qname, lambda job: "done", redis_url):
        wait_until(lambda: queue.get_counts("completed")["completed"] == 1, 15)
        _clears(prometheus, no_worker, old)
    queue.close()


def test_redis_alerts_fire_and_clear(prometheus: Prometheus, redis_url: str) -> None:
    """Redis made to evict, then given a maxmemory 90% used: the eviction
    and memory alerts fire; put back, they clear."""
    r = redis.Redis.from_url(redis_url)
    before = r.config_get("maxmemory", "maxmemory-policy")
    node = prometheus.get("/api/v1/query?query=bullpen_redis_memory_used_bytes")
    (sample,) = node["result"]
    name = sample["metric"]["node"]
    try:
        r.config_set("maxmemory-policy", "allkeys-lru")
        _fires(prometheus, ("BullpenRedisEvictionPolicy", name))
        r.config_set("maxmemory", int(r.info("memory")["used_memory"] / 0.9))
        _fires(prometheus, ("BullpenRedisMemoryHigh", name))
    finally:
        r.config_set("maxmemory", before["maxmemory"])
        r.config_set("maxmemory-policy", before["maxmemory-policy"])
    _clears(
        prometheus,
        ("BullpenRedisEvictionPolicy", name),
        ("BullpenRedisMemoryHigh", name),
    )
    r.close()


def test_a_port_taken_before_prometheus_binds_it_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first pick is a port another process listens on: Prometheus exits
    saying so in its own words (Go's, in lower case) and starts again on the
    next pick (tests/helpers.serve_logged), which it serves."""
    (tmp_path / "prometheus.yml").write_text("global: {scrape_interval: 1s}\n")
    with first_pick_taken(monkeypatch) as picks:
        taken = picks[0]

        def argv(port: int) -> list[str]:
            return [
                str(PROMETHEUS),
                "--config.file=prometheus.yml",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ]

        def ready(port: int) -> bool:
            try:
                url = f"http://127.0.0.1:{port}/-/ready"
                with urllib.request.urlopen(url, timeout=5) as reply:
                    return bool(reply.status == 200)
            except OSError:
                return False

        log = tmp_path / "prometheus.log"
        proc, port = serve_logged(argv, log, answers=ready, cwd=tmp_path)
        try:
            assert port != taken and picks == []
            assert f"127.0.0.1:{port}" in log.read_text()
        finally:
            stop_process(proc, 10)
