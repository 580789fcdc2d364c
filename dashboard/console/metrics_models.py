"""The model families of /metrics (dashboard/console/metrics.py), labels
`gpu` (UUID) and `model`, from the workers' heartbeats (design24.md): the
records' `model_counters` summed over the workers on a GPU, and their
`models` (weights holding VRAM: resident, loading or unloading).

Labels stay bounded: a model label is a valid model name (models.MODEL_NAME)
and a GPU names at most MODELS_PER_GPU of them, the first in name order
(stable from scrape to scrape, so counters stay monotonic); the rest are
summed under model="(other)". A record whose model fields are odd adds
nothing (the GPU page shows why).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from gpu_workers.defaults import MODEL_LOAD_BUCKETS_S
from gpu_workers.fleet import one_per_process

from .reads.models import OTHER, BadRecord, counters, entries

#: Model labels per GPU; the rest are one "(other)".
MODELS_PER_GPU = 16
_LE = [*(str(float(b)) for b in MODEL_LOAD_BUCKETS_S), "+Inf"]
_COUNTS = ("loads", "evictions", "load_failures", "load_ooms")


def _buckets(values: Any, loads: int) -> list[int] | None:
    """Cumulative counts per bound (the last +Inf = loads), or None when the
    record's list is not one count per bound, non-decreasing."""
    if not isinstance(values, list) or len(values) != len(_LE):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    if any(b < a for a, b in zip(values, values[1:])) or values[0] < 0:
        return None
    return [min(v, loads) for v in values[:-1]] + [loads]


class _Gpu:
    """One GPU's sums per model."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, float]] = {}
        self.buckets: dict[str, list[int] | None] = {}
        self.weights: dict[str, int] = {}
        self.resident = 0

    def add(self, record: dict[str, Any]) -> None:
        listed = entries(record) if "models" in record else []
        counted = counters(record)
        raw = record.get("model_counters")
        raw = raw if isinstance(raw, dict) else {}
        self.resident += len(listed)
        for e in listed:
            self.weights[e["name"]] = self.weights.get(e["name"], 0) + e["bytes"]
        for name, c in counted.items():
            mine = self.counts.setdefault(name, dict.fromkeys(_COUNTS, 0.0) | {"s": 0})
            for key in _COUNTS:
                mine[key] += getattr(c, key)
            mine["s"] += c.load_seconds_sum
            found = _buckets(raw[name].get("load_seconds_buckets"), c.loads)
            if name not in self.buckets:
                self.buckets[name] = found
            else:
                old = self.buckets[name]
                self.buckets[name] = (
                    None
                    if old is None or found is None
                    else [a + b for a, b in zip(old, found)]
                )

    def folded(self) -> dict[str, str]:
        """Model -> its label: itself, or "(other)" past the cap."""
        names = sorted({*self.counts, *self.weights})
        return {n: n if i < MODELS_PER_GPU else OTHER for i, n in enumerate(names)}


def model_families(workers: Iterable[dict[str, Any]]) -> Iterable[Metric]:
    """The model families, per GPU and model label."""
    gpus: dict[str, _Gpu] = {}
    for w in one_per_process(list(workers)):  # a GPU process's queues: once
        snap = w.get("gpu")
        uuid = snap.get("uuid") if isinstance(snap, dict) else None
        if not isinstance(uuid, str) or not uuid:
            continue
        if "models" not in w and "model_counters" not in w:
            continue  # a worker from before models
        try:
            entries(w) if "models" in w else None
            counters(w)
        except BadRecord:
            continue  # checked first: an odd record adds nothing, not even 0s
        gpus.setdefault(uuid, _Gpu()).add(w)
    ml = ["gpu", "model"]
    loads = CounterMetricFamily(
        "bullpen_model_loads", "Model loads onto the GPU", labels=ml
    )
    evictions = CounterMetricFamily(
        "bullpen_model_evictions", "Models evicted from the GPU", labels=ml
    )
    failures = CounterMetricFamily(
        "bullpen_model_load_failures", "Model loads that raised", labels=ml
    )
    ooms = CounterMetricFamily(
        "bullpen_model_load_ooms", "Model loads that ran out of memory", labels=ml
    )
    seconds = HistogramMetricFamily(
        "bullpen_model_load_seconds", "Time a model load took", labels=ml
    )
    resident = GaugeMetricFamily(
        "bullpen_models_resident",
        "Models holding weights on the GPU (resident, loading or unloading)",
        labels=["gpu"],
    )
    weights = GaugeMetricFamily(
        "bullpen_model_resident_bytes", "A model's weights on the GPU", labels=ml
    )
    for uuid, gpu in sorted(gpus.items()):
        label = gpu.folded()
        resident.add_metric([uuid], float(gpu.resident))
        sums: dict[str, dict[str, float]] = {}
        hist: dict[str, list[int] | None] = {}
        for name, c in gpu.counts.items():
            shown = label[name]
            mine = sums.setdefault(shown, dict.fromkeys(c, 0.0))
            for key, value in c.items():
                mine[key] += value
            found = gpu.buckets.get(name)
            if shown not in hist:
                hist[shown] = found
            elif hist[shown] is not None and found is not None:
                hist[shown] = [a + b for a, b in zip(hist[shown] or [], found)]
            else:
                hist[shown] = None
        for shown, c in sorted(sums.items()):
            labels = [uuid, shown]
            loads.add_metric(labels, c["loads"])
            evictions.add_metric(labels, c["evictions"])
            failures.add_metric(labels, c["load_failures"])
            ooms.add_metric(labels, c["load_ooms"])
            counts = hist.get(shown)
            if counts is not None:
                buckets = [(le, float(n)) for le, n in zip(_LE, counts)]
                seconds.add_metric(labels, buckets, c["s"])
        held: dict[str, int] = {}
        for name, nbytes in gpu.weights.items():
            held[label[name]] = held.get(label[name], 0) + nbytes
        for shown, nbytes in sorted(held.items()):
            weights.add_metric([uuid, shown], float(nbytes))
    yield from (loads, seconds, evictions, failures, ooms, resident, weights)
