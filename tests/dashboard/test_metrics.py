"""/metrics: who may scrape it, and what it says, parsed by prometheus-client's
own parser, against the real test Redis."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from queues import Queue
from tests.dashboard.helpers import (
    GiB,
    fill_every_family,
    gpu_fleet,
    make_active,
    run_jobs,
)

pytestmark = pytest.mark.django_db


def scrape(client: Client | None = None, **extra: Any) -> dict[str, Any]:
    """GET /metrics and parse it: family name -> family."""
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(family: Any, **labels: str) -> list[Any]:
    """The family's samples whose labels include these."""
    return [s for s in family.samples if labels.items() <= s.labels.items()]


def value(family: Any, name: str | None = None, **labels: str) -> float:
    """The one sample (of this sample name) with these labels."""
    found = [s for s in samples(family, **labels) if name is None or s.name == name]
    assert len(found) == 1, found
    return found[0].value


# --- access ---------------------------------------------------------------------------
def test_local_scrape_needs_no_token(dashboard_redis: str) -> None:
    """127.0.0.1 is an allowed network by default (the test client's address)."""
    families = scrape()
    assert value(families["bullpen_redis_up"]) == 1


def test_other_networks_are_refused(dashboard_redis: str, settings: Any) -> None:
    """An address outside BULLPEN_METRICS_ALLOW gets 403 when no token is set,
    401 with a Bearer challenge when one is; the right token is let in."""
    settings.BULLPEN_METRICS_ALLOW = ["10.0.0.0/8"]
    far = {"REMOTE_ADDR": "192.0.2.7"}
    assert Client().get("/metrics", **far).status_code == 403
    assert Client().get("/metrics", REMOTE_ADDR="10.9.8.7").status_code == 200
    settings.BULLPEN_METRICS_TOKEN = "s3cret-token"
    response = Client().get("/metrics", **far)
    assert response.status_code == 401 and "Bearer" in response["WWW-Authenticate"]
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer nope", **far)
    assert wrong.status_code == 401
    families = scrape(HTTP_AUTHORIZATION="Bearer s3cret-token", **far)
    assert "bullpen_queue_jobs" in families


def test_behind_a_trusted_proxy_the_forwarded_client_is_checked(
    dashboard_redis: str, settings: Any
) -> None:
    """Behind BULLPEN_TRUSTED_PROXY_COUNT proxies the allowed networks are
    matched against the forwarded client, not the proxy (a proxy on the same
    host would otherwise let everyone in); with 0 the header is ignored."""
    via_proxy = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "192.0.2.7"}
    assert Client().get("/metrics", **via_proxy).status_code == 200
    settings.BULLPEN_TRUSTED_PROXY_COUNT = 1
    assert Client().get("/metrics", **via_proxy).status_code == 403
    inside = {"REMOTE_ADDR": "10.0.0.254", "HTTP_X_FORWARDED_FOR": "6.6.6.6, ::1"}
    assert Client().get("/metrics", **inside).status_code == 200


def test_a_logged_in_session_is_not_enough(
    dashboard_redis: str, settings: Any, admin_client: Client
) -> None:
    """Sessions play no part: a superuser from a foreign network is refused."""
    settings.BULLPEN_METRICS_ALLOW = []
    assert admin_client.get("/metrics").status_code == 403


# --- content ------------------------------------------------------------------------
def test_queue_metrics(dashboard_redis: str, r: redis.Redis, qname: str) -> None:
    """Counts per state, paused flag, totals, oldest waiting and the duration
    histograms of the newest finished jobs, per queue."""
    q = Queue(qname, dashboard_redis)
    run_jobs(q, 3, target="completed", value={"ok": 1})
    run_jobs(q, 2, target="failed")
    make_active(q)
    waiting = q.add("w", {})
    q.add("later", {}, delay=60_000)
    q.add("urgent", {}, priority=3)
    q.pause()
    r.hset(f"bull:{qname}:metrics:completed", "count", 1234)
    families = scrape()
    key = f"bull:{qname}"
    jobs = families["bullpen_queue_jobs"]
    got = {s.labels["state"]: s.value for s in samples(jobs, queue=key)}
    assert got == {
        "active": 1,
        "completed": 3,
        "delayed": 1,
        "failed": 2,
        "prioritized": 1,
        "waiting": 1,
        "waiting-children": 0,
    }
    assert value(families["bullpen_queue_paused"], queue=key) == 1
    assert families["bullpen_queue_completed"].type == "counter"
    assert value(families["bullpen_queue_completed"], queue=key) == 1234
    assert samples(families["bullpen_queue_failed"], queue=key) == []  # not collected
    oldest = value(
        families["bullpen_queue_oldest_waiting_timestamp_seconds"], queue=key
    )
    assert oldest == pytest.approx(waiting.timestamp / 1000)
    run = families["bullpen_job_run_duration_seconds"]
    assert run.type == "histogram"
    buckets = {s.labels["le"]: s.value for s in samples(run, queue=key)}
    assert buckets["+Inf"] == 5 and buckets["0.5"] == 5  # finished 5 ms after start
    assert value(families["bullpen_job_run_duration_seconds_gcount"], queue=key) == 5
    wait = families["bullpen_job_wait_duration_seconds"]
    assert {s.labels["le"]: s.value for s in samples(wait, queue=key)}["+Inf"] == 5


def test_worker_and_gpu_metrics(dashboard_redis: str, r: redis.Redis) -> None:
    """Worker state, heartbeat, restarts and job counters; GPU memory (used,
    committed, free, total), utilisation ratio, temperature, power, OOMs."""
    gpu_fleet(r)
    families = scrape()
    worker = {"worker": "h1:bull:gpu:GPU-abc"}
    state = families["bullpen_worker_state"]
    assert {s.labels["state"]: s.value for s in samples(state, **worker)} == {
        "starting": 0,
        "idle": 0,
        "busy": 1,
        "draining": 0,
        "failed": 0,
    }
    # When it was last seen: its index entry's expiry less its TTL (30 s), not
    # its record's ts_ms (when the record was last written).
    expiry = r.zscore("bullpen:workers", worker["worker"])
    assert expiry is not None
    assert value(families["bullpen_worker_heartbeat_timestamp_seconds"], **worker) == (
        (expiry - 30_000) / 1000
    )
    assert value(families["bullpen_worker_restarts"], **worker) == 2
    assert value(families["bullpen_worker_jobs"], outcome="oom", **worker) == 1
    assert value(families["bullpen_worker_running_jobs"], **worker) == 1
    real = {"gpu": "GPU-abc", "host": "h1", "simulated": "false"}
    assert value(families["bullpen_gpu_memory_total_bytes"], **real) == 141 * GiB
    assert value(families["bullpen_gpu_memory_used_bytes"], **real) == 40 * GiB
    assert value(families["bullpen_gpu_memory_committed_bytes"], **real) == 30 * GiB
    assert value(families["bullpen_gpu_memory_free_bytes"], **real) == 101 * GiB
    assert value(families["bullpen_gpu_utilization_ratio"], **real) == 0.87
    assert value(families["bullpen_gpu_temperature_celsius"], **real) == 61
    assert value(families["bullpen_gpu_power_watts"], **real) == 412.5
    assert value(families["bullpen_gpu_oom"], **real) == 3
    sim = {"gpu": "SIM-h1-0", "simulated": "true"}
    # Simulated use is what the workers on it hold (Fleet.list_gpus).
    assert value(families["bullpen_gpu_memory_used_bytes"], **sim) == 3 * GiB
    assert samples(families["bullpen_gpu_temperature_celsius"], **sim) == []


def test_names_follow_prometheus_conventions(
    dashboard_redis: str, r: redis.Redis, qname: str
) -> None:
    """bullpen_ prefix, base units in the name, _total on every counter."""
    gpu_fleet(r)
    run_jobs(Queue(qname, dashboard_redis), 1, target="completed", value=1)
    response = Client().get("/metrics")
    text = response.content.decode()
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("bullpen_"), family.name
        for sample in family.samples:
            if family.type == "counter":
                assert sample.name.endswith("_total"), sample.name
    for unit in ("_bytes", "_seconds", "_ratio", "_celsius", "_watts"):
        assert unit in text
    assert "_milliseconds" not in text and "_percent" not in text


def test_redis_down_is_reported_not_raised(dashboard_redis: str, settings: Any) -> None:
    """A scrape while Redis is unreachable answers bullpen_redis_up 0."""
    from dashboard.console import reads
    from tests.redis_server import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    reads.reset()
    families = scrape()
    assert value(families["bullpen_redis_up"]) == 0
    assert "bullpen_queue_jobs" not in families


def test_scrape_cost_does_not_grow_with_the_queue(
    dashboard_redis: str, r: redis.Redis, qname: str, settings: Any
) -> None:
    """The commands one scrape sends are the same for 20 or 400 finished jobs
    (the duration sample is bounded; counts never walk a list)."""
    settings.BULLPEN_METRICS_SAMPLE_JOBS = 10
    q = Queue(qname, dashboard_redis)

    def commands_per_scrape() -> int:
        scrape()  # scripts loaded, discovery cached
        r.config_resetstat()
        scrape()
        stats = r.info("commandstats")
        return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_config")

    run_jobs(q, 20, target="completed", value=1)
    small = commands_per_scrape()
    for _ in range(19):
        run_jobs(q, 20, target="completed", value=1)
    assert q.get_counts("completed")["completed"] == 400
    assert commands_per_scrape() == small


@pytest.mark.parametrize(
    "path", ["deploy/grafana/bullpen.json", "deploy/prometheus/rules.yml"]
)
def test_grafana_and_alert_rules_use_only_exported_metrics(
    dashboard_redis: str, r: redis.Redis, qname: str, path: str
) -> None:
    """Every metric the Grafana dashboard and the alert rules query is one
    /metrics exports (a renamed family would leave a panel empty and an alert
    silent forever)."""
    import re
    from pathlib import Path

    fill_every_family(r, Queue(qname, dashboard_redis))
    text = Client().get("/metrics").content.decode()
    exported = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    source = (Path(__file__).resolve().parents[2] / path).read_text()
    used = set(re.findall(r"bullpen_[a-z_]+", source))
    assert used and used <= exported, used - exported


def test_the_fleet_is_written_once_per_snapshot_the_queues_every_scrape(
    dashboard_redis: str, r: redis.Redis, qname: str, settings: Any
) -> None:
    """The fleet's families (most of a scrape at 4,096 GPUs) are written out
    once per fleet snapshot and encoder; the queues' are read and written on
    every scrape; an OpenMetrics scrape still ends with one `# EOF`."""
    from prometheus_client.exposition import generate_latest
    from prometheus_client.openmetrics import exposition as om
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as om_families,
    )

    from dashboard.console import reads
    from dashboard.console.metrics import BullpenCollector

    settings.BULLPEN_FLEET_MAX_AGE_S = 3600  # one snapshot until reset
    reads.reset()
    gpu_fleet(r)
    q = Queue(qname, dashboard_redis)
    written: list[set[str]] = []

    def encoder(registry: Any) -> bytes:
        written.append({f.name for f in registry.collect()})
        return generate_latest(registry)

    def waiting(text: bytes) -> float:
        family = {f.name: f for f in text_string_to_metric_families(text.decode())}
        return value(
            family["bullpen_queue_jobs"], queue=f"bull:{qname}", state="waiting"
        )

    collector = BullpenCollector()
    q.add("one")
    first = collector.exposition(encoder)
    q.add("two")
    second = collector.exposition(encoder)
    assert (waiting(first), waiting(second)) == (1, 2)
    fleet = [names for names in written if "bullpen_gpu_memory_total_bytes" in names]
    assert len(fleet) == 1 and sum("bullpen_queue_jobs" in n for n in written) == 2
    reads.reset()  # a new snapshot: written again
    collector.exposition(encoder)
    assert sum("bullpen_gpu_memory_total_bytes" in n for n in written) == 2

    text = collector.exposition(om.generate_latest).decode()
    assert text.count("# EOF") == 1 and text.endswith("# EOF\n")
    names = {f.name for f in om_families(text)}
    assert {"bullpen_gpu_memory_total_bytes", "bullpen_queue_jobs"} <= names
