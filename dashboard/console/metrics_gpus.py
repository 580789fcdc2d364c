"""The GPU families of /metrics (dashboard/console/metrics.py): memory,
utilization, temperature, power and OOMs of each GPU the workers report, the
fleet's aggregates, and which GPUs and workers get series of their own when
the fleet is larger than BULLPEN_METRICS_TOP_GPUS (`labelled`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpu_workers.fleet_snapshot import GPU_STATES, FleetSnapshot
from queues.names import qualified_name


def number(value: Any) -> float | None:
    """A sample's value as a float, None when absent or not a number."""
    return float(value) if isinstance(value, (int, float)) else None


def gpu_families(gpus: list[dict[str, Any]]) -> Iterable[Metric]:
    """The GPU families, one sample per GPU of the heartbeats' snapshots."""
    gl = ["host", "gpu", "index", "name", "simulated"]

    def gauge(name: str, doc: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=gl)

    memory = {
        "memory_total_bytes": gauge("bullpen_gpu_memory_total_bytes", "Device memory"),
        "memory_used_bytes": gauge(
            "bullpen_gpu_memory_used_bytes", "Device memory in use"
        ),
        "committed_bytes": gauge(
            "bullpen_gpu_memory_committed_bytes",
            "VRAM committed by admission to running jobs (declared needs)",
        ),
        "memory_free_bytes": gauge(
            "bullpen_gpu_memory_free_bytes", "Device memory not in use"
        ),
        "budget_bytes": gauge(
            "bullpen_gpu_memory_budget_bytes", "VRAM budget of the workers on it"
        ),
    }
    util = gauge("bullpen_gpu_utilization_ratio", "GPU busy time, 0..1")
    temp = gauge("bullpen_gpu_temperature_celsius", "GPU temperature")
    power = gauge("bullpen_gpu_power_watts", "GPU power draw")
    ooms = CounterMetricFamily(
        "bullpen_gpu_oom", "CUDA out-of-memory errors seen on the GPU", labels=gl
    )
    for g in gpus:
        labels = [
            str(g.get("host", "")),
            str(g.get("uuid", "")),
            str(g.get("index", "")),
            str(g.get("name", "")),
            "true" if g.get("simulated") else "false",
        ]
        for field, family in memory.items():
            value = number(g.get(field))
            if value is not None:
                family.add_metric(labels, value)
        if (pct := number(g.get("utilization_gpu_pct"))) is not None:
            util.add_metric(labels, pct / 100)
        if (celsius := number(g.get("temperature_c"))) is not None:
            temp.add_metric(labels, celsius)
        if (watts := number(g.get("power_w"))) is not None:
            power.add_metric(labels, watts)
        ooms.add_metric(labels, float(g.get("oom_total") or 0))
    yield from memory.values()
    yield from (util, temp, power, ooms)


def _attention(snap: FleetSnapshot, i: int, workers: dict[str, Any]) -> bool:
    """Whether GPU i is one an alert may be about: down, an OOM, a worker
    failed or restarted."""
    g = snap.gpus[i]
    if snap.gpu_state[i] == "down" or number(g.get("oom_total")):
        return True
    for ident in g["workers"]:
        w = workers.get(ident) or {}
        if w.get("state") == "failed" or number(w.get("restarts")):
            return True
    return False


def labelled(
    snap: FleetSnapshot, top: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The GPUs and workers /metrics labels one by one: all of them up to
    `top` GPUs (BULLPEN_METRICS_TOP_GPUS); past it, the `top` GPUs alerts
    may be about first (down, OOMs, failed or restarted workers), then the
    fullest (committed over budget), then by host and index; the workers on
    them, and every failed or restarted worker (at most `top` more)."""
    if len(snap.gpus) <= top:
        return snap.gpus, snap.workers
    by_id = {str(w.get("id", "")): w for w in snap.workers}

    def rank(i: int) -> tuple[Any, ...]:
        g = snap.gpus[i]
        budget = number(g.get("budget_bytes")) or 0.0
        full = (number(g.get("committed_bytes")) or 0.0) / budget if budget else 0.0
        return (not _attention(snap, i, by_id), -full, g["host"], str(g.get("index")))

    chosen = sorted(sorted(range(len(snap.gpus)), key=rank)[:top])
    gpus = [snap.gpus[i] for i in chosen]
    ids = {ident for g in gpus for ident in g["workers"]}
    extra = [
        w
        for w in snap.workers
        if str(w.get("id", "")) not in ids
        and (w.get("state") == "failed" or number(w.get("restarts")))
    ][:top]
    ids.update(str(w.get("id", "")) for w in extra)
    return gpus, [w for w in snap.workers if str(w.get("id", "")) in ids]


def fleet_families(snap: FleetSnapshot, shown: int) -> Iterable[Metric]:
    """The whole fleet's aggregates, whatever BULLPEN_METRICS_TOP_GPUS
    labels one by one: GPUs per state, workers per queue and state, VRAM and
    OOMs summed, and how many GPUs have their own series."""
    s = snap.summary
    states = GaugeMetricFamily(
        "bullpen_fleet_gpus",
        "GPUs of live hosts by state: busy, idle, down (reading failed or only "
        "failed workers), unused (no worker)",
        labels=["state"],
    )
    for state in GPU_STATES:
        states.add_metric([state], float(s.get(state, 0)))
    workers = GaugeMetricFamily(
        "bullpen_fleet_workers",
        "Live worker records by queue and state",
        labels=["queue", "state"],
    )
    counted: dict[tuple[str, str], int] = {}
    for w in snap.workers:
        key = (
            qualified_name(str(w.get("prefix", "bull")), str(w.get("queue", ""))),
            str(w.get("state", "")),
        )
        counted[key] = counted.get(key, 0) + 1
    for (queue, state), n in sorted(counted.items()):
        workers.add_metric([queue, state], float(n))
    yield states
    yield workers
    for field, doc in (
        ("total_bytes", "Device memory of every GPU"),
        ("used_bytes", "Device memory in use, summed over the GPUs"),
        ("committed_bytes", "VRAM committed by admission, summed over the GPUs"),
        ("budget_bytes", "VRAM budget of the workers, summed over the GPUs"),
    ):
        family = GaugeMetricFamily(f"bullpen_fleet_gpu_memory_{field}", doc)
        family.add_metric([], float(s.get(field, 0)))
        yield family
    ooms = CounterMetricFamily(
        "bullpen_fleet_gpu_oom", "CUDA out-of-memory errors summed over the GPUs"
    )
    ooms.add_metric([], float(s.get("oom_total", 0)))
    yield ooms
    labelled_gpus = GaugeMetricFamily(
        "bullpen_fleet_gpus_labelled",
        "GPUs with series of their own (at most BULLPEN_METRICS_TOP_GPUS)",
    )
    labelled_gpus.add_metric([], float(shown))
    yield labelled_gpus
