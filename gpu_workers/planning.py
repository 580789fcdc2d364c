"""Where a host's worker processes go and the VRAM budget each one gets.

Each queue runs at most one worker process per GPU it may use (in the order
configured). Processes sharing a GPU split its usable memory: total - driver
reserve (the larger of the setting and what NVML v2 reports) - safety margin
- one CUDA context per process, then a queue's `vram_share` of that (or an
equal split among the queues that set none), so the budgets on one GPU never
add up to more than the GPU has.

With `process_per_gpu` (the default) one process serves every queue of a
GPU: each of its queues gets the GPU's whole budget of one process, which
that process's queues share (gpu_process.py), and `vram_share` is ignored
(one warning at start names the queues that set it).
"""

from __future__ import annotations

import logging
from typing import Any

from .admission import compute_budget
from .config import QueueConfig, SupervisorConfig
from .exceptions import ConfigError
from .probe import GpuInfo, GpuProbe

log = logging.getLogger("gpu_workers.planning")

#: queue key (`prefix:queue`) -> [(GPU, budget bytes)] in placement order.
Plan = dict[str, list[tuple[GpuInfo, int]]]


def gpus_of(q: QueueConfig, gpus: list[GpuInfo]) -> list[GpuInfo]:
    """The GPUs a queue may use, by UUID or index, in its configured order."""
    if q.gpus is None:
        return list(gpus)
    chosen: list[GpuInfo] = []
    for ref in q.gpus:
        match = [g for g in gpus if g.uuid == ref or str(g.index) == str(ref)]
        if not match:
            log.warning("queue %s: GPU %r is not on this host; skipped", q.key, ref)
        chosen.extend(m for m in match if m not in chosen)
    return chosen


def reported_reserve(gpus: list[GpuInfo], probe: GpuProbe) -> dict[str, int]:
    """Driver-reserved memory the probe reports (NVML memory v2), per GPU."""
    out = {}
    for g in gpus:
        try:
            reserved = probe.snapshot(g.uuid).memory_reserved_bytes
        except Exception:  # noqa: BLE001 - a device that cannot be read reserves 0
            reserved = None
        if reserved:
            out[g.uuid] = reserved
    return out


def plan_gpus(config: SupervisorConfig, gpus: list[GpuInfo], probe: GpuProbe) -> Plan:
    """Every queue's GPUs and the budget of its process on each."""
    per_queue = {q.key: gpus_of(q, gpus) for q in config.queues}
    users: dict[str, list[QueueConfig]] = {g.uuid: [] for g in gpus}
    for q in config.queues:
        for g in per_queue[q.key]:
            users[g.uuid].append(q)
    reserved = reported_reserve(gpus, probe)
    plan: Plan = {q.key: [] for q in config.queues}
    if config.process_per_gpu:
        shares = [q.key for q in config.queues if q.vram_share is not None]
        if shares:
            log.warning(
                "vram_share is ignored with one worker process per GPU "
                "(the queues of a GPU share its whole budget): set by %s",
                ", ".join(shares),
            )
        for g in gpus:
            whole = compute_budget(
                g.memory_total_bytes,
                max(config.reserve_bytes, reserved.get(g.uuid, 0)),
                config.context_bytes,
                config.margin_bytes,
            )
            for q in users[g.uuid]:
                plan[q.key].append((g, whole))
        return plan
    for g in gpus:
        sharing = users[g.uuid]
        fixed = sum(q.vram_share for q in sharing if q.vram_share is not None)
        if fixed > 1 + 1e-9:
            raise ConfigError(
                f"vram_share of the queues on GPU {g.uuid} sums to {fixed}"
            )
        open_count = sum(1 for q in sharing if q.vram_share is None)
        for q in sharing:
            share = (
                q.vram_share if q.vram_share is not None else (1 - fixed) / open_count
            )
            budget = compute_budget(
                g.memory_total_bytes,
                max(config.reserve_bytes, reserved.get(g.uuid, 0)),
                config.context_bytes,
                config.margin_bytes,
                processes=len(sharing),
                share=max(share, 1e-9),
            )
            plan[q.key].append((g, budget))
    return plan


def queue_limits(queues: list[QueueConfig], plan: Plan) -> dict[str, dict[str, Any]]:
    """Per queue: how many workers and slots set_desired() may ask for."""
    return {
        q.key: {
            "prefix": q.prefix,
            "queue": q.queue,
            "max_workers": len(plan[q.key]),
            "max_slots": q.max_slots,
            "default_slots": q.slots,
            "gpus": [g.uuid for g, _ in plan[q.key]],
            "budgets": {g.uuid: b for g, b in plan[q.key]},
        }
        for q in queues
    }
