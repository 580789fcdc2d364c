"""The GPU-time families of /metrics (see dashboard/metrics.py): the GPU
workers' running totals (gpu_workers/gputime.py) per queue, job name and
tenant, read from three hashes at scrape time. Their label values are
bounded: each hash holds at most BULLPEN_GPU_TIME_MAX_KEYS keys and
`(other)`."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, Metric

from gpu_workers.gputime import read_totals
from gpu_workers.keys import BullpenKeys

from .shared import conf
from .shared import redis as pages_redis

#: Dimension -> (family name part, label name).
_FAMILIES = {
    "queue": ("", "queue"),
    "name": ("job_name_", "job_name"),
    "tenant": ("tenant_", "tenant"),
}


def gputime_families() -> Iterable[Metric]:
    """GPU-seconds, VRAM-GiB-seconds and attempts counted by the GPU workers."""
    totals = read_totals(pages_redis.client(), BullpenKeys(conf.get().namespace))
    out: list[Metric] = []
    for dim, (part, label) in _FAMILIES.items():
        seconds = CounterMetricFamily(
            f"bullpen_{part}gpu_seconds",
            f"Wall seconds attempts ran on a GPU, per {label} (jobs sharing a GPU "
            "each count their own)",
            labels=[label],
        )
        vram = CounterMetricFamily(
            f"bullpen_{part}vram_gib_seconds",
            f"VRAM held (declared, or the measured peak if larger) in GiB times "
            f"the seconds it was held, per {label}",
            labels=[label],
        )
        attempts = CounterMetricFamily(
            f"bullpen_{part}gpu_attempts",
            f"Attempts that ran on a GPU, per {label}",
            labels=[label],
        )
        simulated = CounterMetricFamily(
            f"bullpen_{part}gpu_simulated_seconds",
            f"The part of bullpen_{part}gpu_seconds_total on simulated GPUs",
            labels=[label],
        )
        for key, row in sorted(totals[dim].items()):
            seconds.add_metric([key], row.gpu_seconds)
            vram.add_metric([key], row.vram_gib_seconds)
            attempts.add_metric([key], float(row.attempts))
            simulated.add_metric([key], row.simulated_seconds)
        out += [seconds, vram, attempts, simulated]
    return out
