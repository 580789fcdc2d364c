"""What the charts read: Bullpen's sampled series (gpu_workers.series) for a
queue, for every queue together (the overview) or per GPU, over a range; and
the dashboard's own sampler, a thread that keeps those series written while
the server runs, whether or not any GPU supervisor does."""

from __future__ import annotations

import logging
import threading
from typing import Any

from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef, known_queues
from dashboard.shared.reads import fleet_snapshot
from dashboard.shared.redis import client
from gpu_workers import defaults as gpu_defaults
from gpu_workers.keys import BullpenKeys
from gpu_workers.series import SeriesSampler, gpu_series, overall_series, queue_series
from queues import ops

from .fleet_page import FleetFilter, host_page

log = logging.getLogger(__name__)

#: Queues the overall chart combines at most (the first, by name).
OVERALL_MAX_QUEUES = 500
#: GPUs the GPU page's chart draws at most (its page of hosts' GPUs).
CHART_GPUS_MAX = 64


def _keys() -> BullpenKeys:
    return BullpenKeys(conf.get().namespace)


def queue_chart(ref: QueueRef, range_name: str) -> dict[str, Any]:
    """One queue's chart columns over a range (gpu_workers.series.read)."""
    return queue_series(
        client(), _keys(), [(ref.prefix, ref.name)], range_name, ops.now_ms()
    )


def overall_chart(range_name: str) -> dict[str, Any]:
    """Every shown queue's series combined (counts and backlog summed), as
    the dashboards' samplers keep it (one read however many queues)."""
    refs = known_queues()
    chart = overall_series(
        client(),
        _keys(),
        [(r.prefix, r.name) for r in refs[:OVERALL_MAX_QUEUES]],
        range_name,
        ops.now_ms(),
    )
    chart["queues"] = min(len(refs), OVERALL_MAX_QUEUES)
    chart["queues_left_out"] = max(len(refs) - OVERALL_MAX_QUEUES, 0)
    return chart


def gpu_chart(range_name: str, flt: FleetFilter | None = None) -> dict[str, Any]:
    """Utilisation and committed VRAM over a range of the GPUs whose cards
    the GPU page shows with these filters (its page of hosts, at most
    CHART_GPUS_MAX GPUs): a chart of every GPU of a large fleet would be
    thousands of lines, and its read one zset per GPU."""
    snap = fleet_snapshot()
    page = host_page(snap, flt or FleetFilter())
    shown = [
        snap.gpus[i]
        for name in page.names
        for i in snap.gpus_by_host.get(name, [])
        if page.gpus is None or i in page.gpus
    ][:CHART_GPUS_MAX]
    return gpu_series(
        client(),
        _keys(),
        range_name,
        ops.now_ms(),
        live_gpus=shown,
        only=[g["uuid"] for g in shown],
    )


class _Sampler:
    """The process's sampling thread (started once, see `start_sampling`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()

    def start(self) -> bool:
        with self.lock:
            if self.thread is not None or not conf.get().series_sampling:
                return False
            self.thread = threading.Thread(
                target=self._run, name="bullpen-series", daemon=True
            )
            self.thread.start()
            return True

    def _run(self) -> None:
        sampler: SeriesSampler | None = None
        while not self.stop.is_set():
            try:
                # One sampler for the thread: it remembers the claims it tried.
                sampler = sampler or SeriesSampler(client(), conf.get().namespace)
                sampler.tick_quietly(
                    [(r.prefix, r.name) for r in known_queues()], overall=True
                )
            except Exception as exc:  # noqa: BLE001 - the next tick tries again
                log.warning("series sampling failed: %r", exc)
            self.stop.wait(gpu_defaults.SERIES_TICK_S)


_sampler = _Sampler()


def start_sampling() -> bool:
    """Start this process's sampler thread (the server calls this when it
    starts; `conf.series_sampling` off turns it off); False if it runs or is off."""
    return _sampler.start()
