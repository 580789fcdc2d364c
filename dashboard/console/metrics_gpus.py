"""The GPU families of /metrics (dashboard/console/metrics.py): memory,
utilization, temperature, power and OOMs of each GPU the workers report."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


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
