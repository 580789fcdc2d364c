"""The whole fleet read once: every live host and worker record, each GPU
joined with the workers on it, and the aggregates pages and /metrics show
(fleet summary, per host, per queue, per model, per GPU state), so that a
reader pays one read for all of them instead of one per request.

    snap = fleet.snapshot()            # 3 pipelined round trips, any fleet size
    snap.summary["busy"], snap.per_queue["bull:render"]["slots"]
    snap.cell(i)                       # GPU i as one compact row, for a grid

fleet_cache.py keeps one per process with a bounded age. Records come from
other processes: one that is not what the contract says (fleet.py) is
skipped or read leniently, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from queues import codec
from queues.cluster import is_cluster_client

from .clock import now_ms
from .keys import BullpenKeys

#: A GPU's state on the page: a worker holds jobs; workers live, none busy;
#: the reading failed or only failed workers; no worker at all.
GPU_STATES = ("busy", "idle", "down", "unused")
#: The grid's colour step (gpus.css h0..h10): a cell's percentages are
#: rounded to it.
CELL_STEP_PCT = 10


def parse_records(values: Iterable[Any]) -> list[dict[str, Any]]:
    """The JSON objects among raw record values (others skipped)."""
    out = []
    for value in values:
        if not value:
            continue
        try:
            record = codec.loads(value)
        except (codec.JSONDecodeError, TypeError, ValueError):
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def seen_ms(record: dict[str, Any], expiry_ms: Any) -> int | None:
    """When a host or worker was last seen (ms): its index entry's expiry
    less the TTL its record carries (a vouched-for record's `ts_ms` says
    only when it was last written, up to RECORD_REFRESH_S ago); `ts_ms` for
    a record without `ttl_s` (written before it was carried)."""
    ttl = record.get("ttl_s")
    if _number(ttl) and _number(expiry_ms):
        return int(expiry_ms - ttl * 1000)
    ts = record.get("ts_ms")
    return int(ts) if _number(ts) else None


def parse_live(values: Iterable[Any], expiries: Iterable[Any]) -> list[dict[str, Any]]:
    """The JSON objects among the records of live index entries (others
    skipped), each given `seen_ms` from its entry's expiry."""
    out = []
    for value, expiry in zip(values, expiries, strict=True):
        for record in parse_records([value]):
            record["seen_ms"] = seen_ms(record, expiry)
            out.append(record)
    return out


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _num(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and value > 0 else 0


def one_per_process(workers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with one per worker process: the queues of one GPU process
    (a record with `process`) share its budget, committed VRAM and reading,
    so a sum over them counts the process once (by host and pid)."""
    seen: set[tuple[Any, Any]] = set()
    out = []
    for w in workers:
        process = w.get("process")
        if isinstance(process, dict) and w.get("pid") is not None:
            key = (w.get("host"), w.get("pid"))
            if key in seen:
                continue
            seen.add(key)
        out.append(w)
    return out


def _simulated_reading(
    gpu: dict[str, Any], workers: list[dict[str, Any]]
) -> dict[str, Any]:
    """A simulated GPU as its worker processes see it: only they hold its
    memory, so the supervisor's own reading says idle and empty; memory is
    their sum, utilisation and temperature their highest."""
    snaps: list[dict[str, Any]] = [
        w["gpu"]
        for w in workers
        if w.get("state") != "failed" and isinstance(w.get("gpu"), dict)
    ]
    used = sum(_num(snap.get("memory_used_bytes")) for snap in snaps)
    total = _num(gpu.get("memory_total_bytes"))
    out: dict[str, Any] = {
        "memory_used_bytes": used,
        "memory_free_bytes": total - used,
        "utilization_memory_pct": int(100 * used / total) if total else 0,
    }
    for name in ("utilization_gpu_pct", "temperature_c"):
        values = [
            snap[name] for snap in snaps if isinstance(snap.get(name), (int, float))
        ]
        if values:
            out[name] = max(values)
    return out


def _worker_gpu(record: dict[str, Any]) -> str:
    snap = record.get("gpu")
    return str(snap.get("uuid", "")) if isinstance(snap, dict) else ""


def host_gpus(host: dict[str, Any]) -> list[dict[str, Any]]:
    """A host record's GPUs that have a uuid (others skipped)."""
    gpus = host.get("gpus")
    return [
        g
        for g in (gpus if isinstance(gpus, list) else [])
        if isinstance(g, dict) and isinstance(g.get("uuid"), str) and g["uuid"]
    ]


def join_gpus(
    hosts: list[dict[str, Any]],
    workers: list[dict[str, Any]],
    ooms: dict[str, int],
) -> list[dict[str, Any]]:
    """Every host's GPUs (Fleet.list_gpus rows): the probe's reading, the
    budget and committed VRAM of the workers on it, their ids, its OOM
    count. Workers are indexed by (host, GPU uuid) once: linear in the fleet."""
    on: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for w in workers:
        on.setdefault((str(w.get("host", "")), _worker_gpu(w)), []).append(w)
    rows = []
    for host in hosts:
        name = str(host.get("host", ""))
        for gpu in host_gpus(host):
            mine = on.get((name, gpu["uuid"]), [])
            row = dict(gpu)
            row["host"] = name
            row["workers"] = [str(w.get("id", "")) for w in mine]
            procs = one_per_process(mine)
            row["budget_bytes"] = sum(_num(w.get("budget_bytes")) for w in procs)
            row["committed_bytes"] = sum(_num(w.get("committed_bytes")) for w in procs)
            if gpu.get("simulated"):
                row.update(_simulated_reading(gpu, procs))
            row["oom_total"] = ooms.get(gpu["uuid"], 0)
            rows.append(row)
    return rows


def gpu_state(row: dict[str, Any], workers: list[dict[str, Any]]) -> str:
    """busy, idle, down or unused (GPU_STATES) from a GPU row and its workers."""
    if row.get("error"):
        return "down"
    states = [str(w.get("state", "")) for w in workers]
    if any(s == "busy" or w.get("running") for s, w in zip(states, workers)):
        return "busy"
    if any(s not in ("failed", "") for s in states):
        return "idle"
    return "down" if states else "unused"


def _models(workers: list[dict[str, Any]]) -> list[str]:
    names: set[str] = set()
    for w in workers:
        models = w.get("models")
        for entry in models if isinstance(models, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names.add(entry["name"][:100])
    return sorted(names)


#: A queue's aggregates: live workers (not failed nor draining) and their
#: slots, draining and failed workers, jobs their records hold.
_PER_QUEUE = ("workers", "slots", "draining", "failed", "running_jobs")


def _queue_key(w: dict[str, Any]) -> str:
    return f"{w.get('prefix', 'bull')}:{w.get('queue', '')}"


@dataclass
class FleetSnapshot:
    """The fleet at `taken_ms`: records, joined GPU rows and aggregates."""

    taken_ms: int
    hosts: list[dict[str, Any]]
    workers: list[dict[str, Any]]
    gpus: list[dict[str, Any]]
    #: Per GPU (same order as `gpus`): state, queues and models of its workers.
    gpu_state: list[str] = field(default_factory=list)
    gpu_queues: list[list[str]] = field(default_factory=list)
    gpu_models: list[list[str]] = field(default_factory=list)
    summary: dict[str, int] = field(default_factory=dict)
    per_host: dict[str, dict[str, int]] = field(default_factory=dict)
    per_queue: dict[str, dict[str, int]] = field(default_factory=dict)
    per_model: dict[str, int] = field(default_factory=dict)
    workers_by_host: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Indices into `gpus` per host.
    gpus_by_host: dict[str, list[int]] = field(default_factory=dict)
    #: Workers not failed, per `host/prefix:queue` (the scaling table's Running).
    running: dict[str, int] = field(default_factory=dict)

    @property
    def age_s(self) -> float:
        """Seconds since it was read."""
        return max(now_ms() - self.taken_ms, 0) / 1000

    def cell(self, i: int) -> list[Any]:
        """GPU i as the grid draws it: [host, index, uuid, state, util %,
        VRAM used %, committed %], the percentages rounded to the grid's
        colour step (CELL_STEP_PCT: a live diff then carries a cell when its
        colour may change, not whenever a reading moves; None when unknown)."""
        g = self.gpus[i]
        total = _num(g.get("memory_total_bytes"))
        used: Any = g.get("memory_used_bytes")
        util: Any = g.get("utilization_gpu_pct")
        return [
            g["host"],
            g.get("index") if isinstance(g.get("index"), int) else None,
            g["uuid"],
            self.gpu_state[i],
            _step(float(util)) if _number(util) else None,
            _step(100 * float(used) / total) if total and _number(used) else None,
            _step(100 * _num(g.get("committed_bytes")) / total) if total else None,
        ]


def _step(pct: float) -> int:
    """A percentage to the nearest CELL_STEP_PCT, halves up (as the grid's
    Math.round), within 0..100."""
    return min(max(int(pct / CELL_STEP_PCT + 0.5), 0), 100 // CELL_STEP_PCT) * (
        CELL_STEP_PCT
    )


def build(
    hosts: list[dict[str, Any]],
    workers: list[dict[str, Any]],
    ooms: dict[str, int],
    taken_ms: int,
) -> FleetSnapshot:
    """A snapshot with its aggregates, from records already read."""
    hosts = sorted(hosts, key=lambda h: str(h.get("host", "")))
    workers = sorted(workers, key=lambda w: str(w.get("id", "")))
    snap = FleetSnapshot(taken_ms, hosts, workers, join_gpus(hosts, workers, ooms))
    by_id = {str(w.get("id", "")): w for w in workers}
    summary = dict.fromkeys(
        (
            *GPU_STATES,
            "gpus",
            "hosts",
            "workers",
            "failed_workers",
            "running_jobs",
            "slots",
            "total_bytes",
            "used_bytes",
            "committed_bytes",
            "budget_bytes",
            "oom_total",
        ),
        0,
    )
    summary["hosts"] = len(hosts)
    for w in workers:
        host = str(w.get("host", ""))
        snap.workers_by_host.setdefault(host, []).append(w)
        # A record naming no queue counts in the fleet, not as a queue.
        named = isinstance(w.get("queue"), str) and w["queue"]
        unnamed: dict[str, int] = dict.fromkeys(_PER_QUEUE, 0)
        q = (
            snap.per_queue.setdefault(_queue_key(w), dict.fromkeys(_PER_QUEUE, 0))
            if named
            else unnamed
        )
        running = w.get("running")
        jobs = len(running) if isinstance(running, list) else 0
        summary["workers"] += 1
        summary["running_jobs"] += jobs
        q["running_jobs"] += jobs
        if w.get("state") == "failed":
            summary["failed_workers"] += 1
            q["failed"] += 1
            continue
        key = f"{host}/{_queue_key(w)}"
        snap.running[key] = snap.running.get(key, 0) + 1
        if w.get("state") == "draining":
            q["draining"] += 1
            continue
        q["workers"] += 1
        q["slots"] += _num(w.get("slots"))
        summary["slots"] += _num(w.get("slots"))
    for h in hosts:  # queues a host may run: a row even with no worker yet
        limits = h.get("queues")
        for limit in (limits if isinstance(limits, dict) else {}).values():
            if isinstance(limit, dict) and limit.get("queue"):
                key = f"{limit.get('prefix', 'bull')}:{limit.get('queue', '')}"
                snap.per_queue.setdefault(key, dict.fromkeys(_PER_QUEUE, 0))
    for i, g in enumerate(snap.gpus):
        snap.gpus_by_host.setdefault(g["host"], []).append(i)
        mine = [by_id[i] for i in g["workers"] if i in by_id]
        state = gpu_state(g, mine)
        snap.gpu_state.append(state)
        snap.gpu_queues.append(sorted({_queue_key(w) for w in mine}))
        models = _models(mine)
        snap.gpu_models.append(models)
        for m in models:
            snap.per_model[m] = snap.per_model.get(m, 0) + 1
        h = snap.per_host.setdefault(g["host"], dict.fromkeys((*GPU_STATES, "gpus"), 0))
        h[state] += 1
        h["gpus"] += 1
        summary[state] += 1
        summary["gpus"] += 1
        summary["total_bytes"] += _num(g.get("memory_total_bytes"))
        summary["used_bytes"] += _num(g.get("memory_used_bytes"))
        summary["committed_bytes"] += _num(g.get("committed_bytes"))
        summary["budget_bytes"] += _num(g.get("budget_bytes"))
        summary["oom_total"] += _num(g.get("oom_total"))
    snap.summary = summary
    return snap


#: Keys one MGET reads (single node).
MGET_KEYS = 1_000


def get_all(client: Any, names: list[str]) -> list[Any]:
    """The values of `names`, in one pipelined round trip: MGETs of
    MGET_KEYS on one node; one GET each on a Redis Cluster, where the
    records sit in many slots, which one MGET may not span."""
    if not names:
        return []
    pipe = client.pipeline(transaction=False)
    if is_cluster_client(client):
        for name in names:
            pipe.get(name)
        return list(pipe.execute())
    for at in range(0, len(names), MGET_KEYS):
        pipe.mget(names[at : at + MGET_KEYS])
    return [v for chunk in pipe.execute() for v in chunk]


def read_snapshot(client: Any, keys: BullpenKeys) -> FleetSnapshot:
    """The fleet in three pipelined round trips whatever its size: the live
    index entries, their records, the OOM counters of their GPUs."""
    now = now_ms()
    pipe = client.pipeline(transaction=False)
    pipe.zrangebyscore(keys.hosts, f"({now}", "+inf", withscores=True)
    pipe.zrangebyscore(keys.workers, f"({now}", "+inf", withscores=True)
    host_entries, worker_entries = pipe.execute()
    names = [keys.host(i) for i, _ in host_entries]
    names += [keys.worker(i) for i, _ in worker_entries]
    values = get_all(client, names)
    hosts = parse_live(values[: len(host_entries)], (e for _, e in host_entries))
    workers = parse_live(values[len(host_entries) :], (e for _, e in worker_entries))
    uuids = sorted({g["uuid"] for h in hosts for g in host_gpus(h)})
    ooms: dict[str, int] = {}
    if uuids:
        pipe = client.pipeline(transaction=False)
        for uuid in uuids:
            pipe.hget(keys.gpu_counters(uuid), "oom_total")
        for uuid, raw in zip(uuids, pipe.execute()):
            ooms[uuid] = int(raw) if raw and str(raw).isdigit() else 0
    return build(hosts, workers, ooms, now)
