"""The GPU page's read model: hosts, their GPUs with VRAM gauges, the workers
on each GPU with their running jobs, desired counts, and a capacity view
(backlog against slots, with an ETA at the measured throughput).

Worker state comes only from the process's fleet snapshot (reads.fleet_snapshot:
gpu_workers/fleet_snapshot.py), for the hosts a page shows; desired counts and
models are read for those hosts only; queue counts and finished-job counts are
gathered ops (pipelined, one round trip for all queues).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dashboard.shared.discovery import QueueRef, slotless
from dashboard.shared.redaction import redact, redact_fields
from gpu_workers.fleet_snapshot import FleetSnapshot
from queues import ops
from queues.drive import cmd, gather
from queues.keys import QueueKeys
from queues.ops import DEFAULT_STATES

from ..display import progress_parts
from . import fleet_snapshot, gpu_fleet, run
from .models import ModelPanel, panels
from .overview import metrics_minutes_op

#: Minutes of finished jobs the capacity view's throughput is measured over.
THROUGHPUT_WINDOW_MIN = 5


def _pct(part: Any, whole: Any) -> float:
    if not isinstance(part, (int, float)) or not whole:
        return 0.0
    return max(0.0, min(100.0, 100.0 * float(part) / float(whole)))


@dataclass
class RunningJob:
    """A job a worker holds, with what its live progress bar needs."""

    id: str
    name: str
    state: str
    declared_bytes: int | None
    live_key: str
    pct: float | None
    text: str
    queue: QueueRef


@dataclass
class WorkerView:
    """One worker process (or a failed/restarting slot) on a GPU."""

    id: str
    queue: QueueRef
    state: str
    heartbeat_age_s: float | None
    slots: int
    budget_bytes: int
    committed_bytes: int
    running: list[RunningJob]
    processed: int
    failed: int
    oom: int
    restarts: int
    reason: str | None

    @property
    def heartbeat_age_ms(self) -> int | None:
        """Milliseconds since the last heartbeat (for the duration filter)."""
        age = self.heartbeat_age_s
        return None if age is None else int(age * 1000)


@dataclass
class GpuView:
    """One GPU of a host: readings, the VRAM gauge and its workers."""

    host: str
    uuid: str
    index: Any
    name: str
    simulated: bool
    total_bytes: int
    used_bytes: int | None
    committed_bytes: int
    budget_bytes: int
    free_bytes: int | None
    utilization_pct: Any
    temperature_c: Any
    power_w: Any
    power_limit_w: Any
    oom_total: int
    error: str | None
    workers: list[WorkerView] = field(default_factory=list)
    #: Its models: the stacked bar, loads, events, pins (reads/models.py).
    models: ModelPanel | None = None

    @property
    def used_pct(self) -> float:
        """Used memory as a share of the device (for the gauge)."""
        return _pct(self.used_bytes, self.total_bytes)

    @property
    def committed_pct(self) -> float:
        """Committed by admission, as a share of the device."""
        return _pct(self.committed_bytes, self.total_bytes)

    @property
    def budget_pct(self) -> float:
        """The workers' budget, as a share of the device (the gauge's marker)."""
        return _pct(self.budget_bytes, self.total_bytes)


@dataclass
class ScaleRow:
    """A queue a host may run workers for: its limits, desired and running counts."""

    host: str
    queue: QueueRef
    desired_workers: int | None
    desired_slots: int | None
    running_workers: int
    max_workers: int
    max_slots: int


@dataclass
class HostView:
    """A supervisor host."""

    host: str
    state: str
    mode: str
    simulated: bool
    heartbeat_age_s: float | None
    gpus: list[GpuView]
    scale: list[ScaleRow]
    #: Workers whose GPU the host does not list (should not happen; shown anyway).
    stray: list[WorkerView] = field(default_factory=list)
    #: Its GPUs per state (busy, idle, down, unused) and in all (`gpus`).
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class CapacityRow:
    """One queue served by GPU workers: backlog against slots."""

    queue: QueueRef
    waiting: int
    prioritized: int
    delayed: int
    active: int
    slots: int
    workers: int
    finished_per_min: float
    eta_s: float | None

    @property
    def backlog(self) -> int:
        """Jobs ready to run: waiting and prioritized."""
        return self.waiting + self.prioritized

    @property
    def eta_ms(self) -> int | None:
        """The ETA in milliseconds (for the duration filter)."""
        return None if self.eta_s is None else int(self.eta_s * 1000)

    @property
    def live_key(self) -> str:
        """`prefix:name`, for data-live-count."""
        return self.queue.key


def _age(seen_ms: Any, now_ms: int) -> float | None:
    """Seconds since a record's host or worker was last seen (`seen_ms`,
    gpu_workers.fleet_snapshot: its record's `ts_ms` is when it was last
    written, which a quiet worker does once a minute)."""
    if not isinstance(seen_ms, (int, float)):
        return None
    return max(now_ms - seen_ms, 0) / 1000


def _worker(record: dict[str, Any], now_ms: int) -> WorkerView:
    ref = QueueRef(str(record.get("prefix", "bull")), str(record.get("queue", "")))
    running = []
    for job in record.get("running") or []:
        pct, text = progress_parts(redact(job.get("progress")))
        job_id = str(job.get("id", ""))
        running.append(
            RunningJob(
                job_id,
                str(job.get("name", "")),
                str(job.get("state", "")),
                job.get("declared_bytes"),
                f"{ref.key}:{job_id}",
                pct,
                text,
                ref,
            )
        )
    counters = record.get("counters") or {}
    return WorkerView(
        id=str(record.get("id", "")),
        queue=ref,
        state=str(record.get("state", "unknown")),
        heartbeat_age_s=_age(record.get("seen_ms"), now_ms),
        slots=int(record.get("slots") or 0),
        budget_bytes=int(record.get("budget_bytes") or 0),
        committed_bytes=int(record.get("committed_bytes") or 0),
        running=running,
        processed=int(counters.get("processed", 0)),
        failed=int(counters.get("failed", 0)),
        oom=int(counters.get("oom", 0)),
        restarts=int(record.get("restarts") or 0),
        reason=record.get("reason"),
    )


def running_key(host: str, queue: QueueRef) -> str:
    """`host/prefix:name`: a scaling row, as the snapshot's `running` keys it."""
    return f"{host}/{queue.key}"


def shown_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worker records as live updates send them: running jobs redacted."""
    return [
        {**r, "running": [redact_fields(j) for j in r.get("running") or []]}
        for r in records
    ]


def _gpu(row: dict[str, Any]) -> GpuView:
    return GpuView(
        host=str(row.get("host", "")),
        uuid=str(row.get("uuid", "")),
        index=row.get("index", ""),
        name=str(row.get("name", "")),
        simulated=bool(row.get("simulated")),
        total_bytes=int(row.get("memory_total_bytes") or 0),
        used_bytes=row.get("memory_used_bytes"),
        committed_bytes=int(row.get("committed_bytes") or 0),
        budget_bytes=int(row.get("budget_bytes") or 0),
        free_bytes=row.get("memory_free_bytes"),
        utilization_pct=row.get("utilization_gpu_pct"),
        temperature_c=row.get("temperature_c"),
        power_w=row.get("power_w"),
        power_limit_w=row.get("power_limit_w"),
        oom_total=int(row.get("oom_total") or 0),
        error=row.get("error"),
    )


def hosts(
    now_ms: int | None = None,
    snap: FleetSnapshot | None = None,
    names: list[str] | None = None,
    gpus: set[int] | None = None,
) -> list[HostView]:
    """The hosts `names` (default every live host) with their GPUs (those of
    `gpus`, indices into the snapshot's, when given), workers and scaling
    rows, from the process's fleet snapshot: desired counts and models are
    read for these hosts only."""
    now_ms = now_ms or ops.now_ms()
    snap = snap or fleet_snapshot()
    registry = gpu_fleet()
    by_name = {str(h.get("host", "")): h for h in snap.hosts}
    wanted = [n for n in names if n in by_name] if names is not None else list(by_name)
    views = []
    records: list[dict[str, Any]] = []
    for name in wanted:
        host = by_name[name]
        mine_records = snap.workers_by_host.get(name, [])
        records.extend(mine_records)
        mine = [_worker(w, now_ms) for w in mine_records]
        by_id = {w.id: w for w in mine}
        placed: set[str] = set()
        shown = []
        for i in snap.gpus_by_host.get(name, []):
            row = snap.gpus[i]
            placed.update(row["workers"])
            if gpus is not None and i not in gpus:
                continue
            view = _gpu(row)
            view.workers = [by_id[w] for w in row["workers"] if w in by_id]
            shown.append(view)
        desired = registry.get_desired(name)
        scale = []
        limits_of = host.get("queues")
        for key, limits in sorted(
            (limits_of if isinstance(limits_of, dict) else {}).items()
        ):
            if not isinstance(limits, dict):
                continue
            ref = QueueRef(
                str(limits.get("prefix", "bull")), str(limits.get("queue", ""))
            )
            want = desired.get(key, {})
            scale.append(
                ScaleRow(
                    host=name,
                    queue=ref,
                    desired_workers=want.get("workers"),
                    desired_slots=want.get("slots"),
                    running_workers=snap.running.get(running_key(name, ref), 0),
                    max_workers=_int(limits.get("max_workers")),
                    max_slots=_int(limits.get("max_slots")),
                )
            )
        views.append(
            HostView(
                host=name,
                state=str(host.get("state", "")),
                mode=str(host.get("mode", "")),
                simulated=bool(host.get("simulated")),
                heartbeat_age_s=_age(host.get("seen_ms"), now_ms),
                gpus=shown,
                scale=scale,
                stray=[w for w in mine if w.id not in placed],
                counts=snap.per_host.get(name, {}),
            )
        )
    every = [g for v in views for g in v.gpus]
    if every:
        found = panels(
            [(g.uuid, g.budget_bytes) for g in every],
            records,
            registry.client,
            registry.keys,
        )
        for gpu in every:
            gpu.models = found.get(gpu.uuid)
    return views


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) else 0


def _capacity_op(keys: QueueKeys, since_ms: int) -> ops.Op:
    counts, done, failed, collected = yield from gather(
        [
            ops.get_counts(keys, DEFAULT_STATES),
            cmd("ZCOUNT", keys.completed, since_ms, "+inf"),
            cmd("ZCOUNT", keys.failed, since_ms, "+inf"),
            metrics_minutes_op(keys, THROUGHPUT_WINDOW_MIN + 1),
        ]
    )
    # BullMQ's metrics count jobs that retention deleted: use them when larger
    # (whole minutes: the current one and those before it in the window).
    first = since_ms // 60_000 + 1
    counted = sum(
        n for series in collected.values() for m, n in series.items() if m >= first
    )
    return counts, max(int(done) + int(failed), counted)


def capacity(
    snap: FleetSnapshot | None = None, now_ms: int | None = None
) -> list[CapacityRow]:
    """Per queue that GPU workers serve (or a live host may run): backlog
    (waiting + prioritized) against the slots of its live workers (the
    snapshot's per-queue aggregates), with an ETA at the throughput of the
    last THROUGHPUT_WINDOW_MIN minutes (finished jobs that retention keeps, or
    BullMQ's per-minute metrics where workers collect them)."""
    now_ms = now_ms or ops.now_ms()
    snap = snap or fleet_snapshot()
    per_queue = {}
    for key, agg in snap.per_queue.items():
        prefix, _, name = key.rpartition(":")
        per_queue[QueueRef(prefix, name)] = agg
    # A queue without a hash tag on a cluster cannot be read (its record was
    # written elsewhere or by hand): no row, rather than a CROSSSLOT page.
    refs = sorted(r for r in per_queue if not slotless(r))
    if not refs:
        return []
    since = now_ms - THROUGHPUT_WINDOW_MIN * 60_000
    found = run(
        gather([_capacity_op(QueueKeys(r.name, r.prefix), since) for r in refs])
    )
    rows = []
    for ref, (counts, finished) in zip(refs, found):
        agg = per_queue[ref]
        backlog = counts.get("waiting", 0) + counts.get("prioritized", 0)
        per_min = finished / THROUGHPUT_WINDOW_MIN
        eta = backlog / (per_min / 60) if backlog and per_min else None
        rows.append(
            CapacityRow(
                queue=ref,
                waiting=counts.get("waiting", 0),
                prioritized=counts.get("prioritized", 0),
                delayed=counts.get("delayed", 0),
                active=counts.get("active", 0),
                slots=agg["slots"],
                workers=agg["workers"],
                finished_per_min=per_min,
                eta_s=eta,
            )
        )
    return rows
