"""Every Redis key of Bullpen's own namespace, in one place.

Bullpen's data never lives inside a queue's keys (`{prefix}:{queue}:...`), so
BullMQ clients ignore it. With the default namespace `bullpen`:

- `bullpen:hosts` (zset): host -> expiry (ms) of its last heartbeat
- `bullpen:host:{host}` (string, TTL): supervisor heartbeat, JSON: state,
  GPU snapshots, per-queue limits, children
- `bullpen:workers` (zset): worker id -> expiry (ms) of its last heartbeat
- `bullpen:worker:{host}:{prefix}:{queue}:{gpu uuid}` (string, TTL): worker
  heartbeat, JSON (see fleet.py)
- `bullpen:desired:{host}` (hash): `{prefix}:{queue}` -> {"workers", "slots"}
- `bullpen:cancel:{prefix}:{queue}:{job id}` (string, TTL): cancel request
- `bullpen:job:{prefix}:{queue}:{job id}` (hash, TTL 7 days): declared vs
  measured VRAM of a job (see worker.py)
- `bullpen:attempts:{prefix}:{queue}:{job id}` (list, TTL 7 days): a job's
  attempt records, newest first (written by every queues worker: see
  queues/attempts.py; a GPU worker adds its GPU and VRAM)
- `bullpen:gpu:{uuid}:counters` (hash): oom_total per GPU
- `bullpen:{gputime}:{hour|day}:{stamp}:{queue|name|tenant|all}` (hash, TTL
  `hours_kept` / `days_kept` after the bucket): GPU-time per key of one UTC
  hour (stamp YYYYMMDDHH) or day (YYYYMMDD); `bullpen:{gputime}:total:{dim}`
  (hash): running totals. Fields `s|`, `v|`, `n|`, `sim|` + key; at most
  `max_keys` keys each, the rest in `(other)` (see gputime.py). The hash tag
  puts them all in one cluster slot, so one script call updates them.
- `bullpen:{gputime}:group:{stamp}:{prefix}:{queue}` (hash, TTL 8 days after
  the day): GPU-seconds per group of the queue in one UTC day (YYYYMMDD), at
  most 10,000 groups, the rest in `(other)` (a group with a budget always
  counts as itself); `bullpen:{gputime}:budget:{prefix}:{queue}` (hash):
  group -> GPU-seconds it may use a UTC day (see quota.py)
- `bullpen:models:warm:{model}` / `bullpen:models:open:{model}` (zset): GPU
  uuid -> expiry (ms): GPUs where the model is resident / resident with a
  free slot (placement.py reads them; the worker refreshes its own)
- `bullpen:models:stats` (hash): model -> JSON {loads, load_s_sum,
  ewma_load_s, weights_bytes, ts_ms}: measured loads, fleet-wide
- `bullpen:models:events` (stream, capped): model loads, evictions, failures
- `bullpen:models:pins` (hash): GPU uuid -> JSON list of models operators pinned
- `bullpen:models:pool` (hash): GPU uuid -> JSON {models, ts_ms, why}: the
  warm pools the supervisors decided; `bullpen:models:planner` (string,
  SET NX PX): the supervisor planning them this tick
- `bullpen:stream:workers` (stream, capped): heartbeats and state changes
- `bullpen:{control}:host:{host}` (stream, capped): "the desired counts of
  this host changed" (Fleet.set_desired); `bullpen:{control}:all` (stream,
  capped): "a cancel was requested" (Fleet.request_cancel). Workers and
  supervisors hold a blocking XREAD on them (control.py); the hash tag puts
  both in one cluster slot, so one XREAD reads both
- `bullpen:series:{prefix}:{queue}:{level}` (zset, level 1m / 10m / 1h):
  the queue's sampled points (JSON, score = the point's start in ms), trimmed
  on every write to the level's retention (series/; the key carries the
  queue's hash tag, so a queue's series sit in its slot on a cluster)
- `bullpen:series:{prefix}:{queue}:claim:{minute ms}` (string, TTL): the
  sampler that wrote that minute's point (SET NX: one per minute cluster-wide)
- `bullpen:series:gpu:{uuid}:{level}` (zset) and
  `bullpen:series:gpu:{uuid}:claim:{minute ms}` (string, TTL): the same per GPU
- `bullpen:series:overall:{level}` (zset) and
  `bullpen:series:overall:claim:{minute ms}` (string, TTL): every discovered
  queue's minute combined, written a minute after the queues' own points by
  a dashboard's sampler (one per minute, claimed the same way)
- `bullpen:series:gpus` (zset): GPU uuid -> last minute (ms) sampled, and
  `bullpen:series:gpu-info` (hash): uuid -> JSON {host, index, name}
"""

from __future__ import annotations

from queues.keys import attempts_key

from . import defaults


class BullpenKeys:
    """Key names under one namespace."""

    __slots__ = ("ns", "hosts", "workers", "stream")

    def __init__(self, namespace: str = defaults.NAMESPACE) -> None:
        self.ns = namespace
        self.hosts = f"{namespace}:hosts"
        self.workers = f"{namespace}:workers"
        self.stream = f"{namespace}:stream:workers"

    def host(self, host: str) -> str:
        """A supervisor's heartbeat record."""
        return f"{self.ns}:host:{host}"

    def worker(self, worker_id: str) -> str:
        """A worker's heartbeat record."""
        return f"{self.ns}:worker:{worker_id}"

    def control_host(self, host: str) -> str:
        """A host's control stream: its desired counts changed."""
        return f"{self.ns}:{{control}}:host:{host}"

    def control_all(self) -> str:
        """The fleet's control stream: a cancel was requested."""
        return f"{self.ns}:{{control}}:all"

    def desired(self, host: str) -> str:
        """A host's desired worker counts and slots per queue."""
        return f"{self.ns}:desired:{host}"

    def cancel(self, prefix: str, queue: str, job_id: str) -> str:
        """A request to cancel a job."""
        return f"{self.ns}:cancel:{prefix}:{queue}:{job_id}"

    def job(self, prefix: str, queue: str, job_id: str) -> str:
        """A job's declared and measured VRAM."""
        return f"{self.ns}:job:{prefix}:{queue}:{job_id}"

    def attempts(self, prefix: str, queue: str, job_id: str) -> str:
        """A job's attempt history (queues/attempts.py)."""
        return attempts_key(self.ns, prefix, queue, job_id)

    def gpu_counters(self, uuid: str) -> str:
        """Counters of one GPU (oom_total)."""
        return f"{self.ns}:gpu:{uuid}:counters"

    def model_warm(self, model: str) -> str:
        """GPUs where a model is resident: uuid -> expiry (ms)."""
        return f"{self.ns}:models:warm:{model}"

    def model_open(self, model: str) -> str:
        """GPUs where a model is resident and a slot is free: uuid -> expiry (ms)."""
        return f"{self.ns}:models:open:{model}"

    def model_stats(self) -> str:
        """Measured loads per model (JSON per field)."""
        return f"{self.ns}:models:stats"

    def model_events(self) -> str:
        """Model loads, evictions and failures (a capped stream)."""
        return f"{self.ns}:models:events"

    def model_pins(self) -> str:
        """Operators' pins: GPU uuid -> JSON list of models."""
        return f"{self.ns}:models:pins"

    def model_pool(self) -> str:
        """The supervisors' warm pools: GPU uuid -> JSON {models, ts_ms, why}."""
        return f"{self.ns}:models:pool"

    def model_planner(self) -> str:
        """Who plans the warm pools this tick (SET NX PX)."""
        return f"{self.ns}:models:planner"

    def series(self, prefix: str, queue: str, level: str) -> str:
        """A queue's sampled points at one level (series/)."""
        return f"{self.ns}:series:{prefix}:{queue}:{level}"

    def series_claim(self, prefix: str, queue: str, minute_ms: int) -> str:
        """Who sampled a queue's minute (SET NX)."""
        return f"{self.ns}:series:{prefix}:{queue}:claim:{minute_ms}"

    def gpu_series(self, uuid: str, level: str) -> str:
        """A GPU's sampled points at one level."""
        return f"{self.ns}:series:gpu:{uuid}:{level}"

    def gpu_series_claim(self, uuid: str, minute_ms: int) -> str:
        """Who sampled a GPU's minute (SET NX)."""
        return f"{self.ns}:series:gpu:{uuid}:claim:{minute_ms}"

    def series_gpus(self) -> str:
        """GPUs with points: uuid -> last minute sampled (ms)."""
        return f"{self.ns}:series:gpus"

    def series_gpu_info(self) -> str:
        """uuid -> JSON {host, index, name} of each sampled GPU."""
        return f"{self.ns}:series:gpu-info"

    def series_overall(self, level: str) -> str:
        """Every queue's points combined, at one level (the overview's chart)."""
        return f"{self.ns}:series:overall:{level}"

    def series_overall_claim(self, minute_ms: int) -> str:
        """Who combined a minute of the overall series (SET NX)."""
        return f"{self.ns}:series:overall:claim:{minute_ms}"

    def gputime(self, period: str, stamp: str, dim: str) -> str:
        """GPU-time of one hour or day bucket, by one dimension (gputime.py)."""
        return f"{self.ns}:{{gputime}}:{period}:{stamp}:{dim}"

    def gputime_total(self, dim: str) -> str:
        """Running GPU-time totals by one dimension (for /metrics)."""
        return f"{self.ns}:{{gputime}}:total:{dim}"

    def group_usage(self, qualified: str, stamp: str) -> str:
        """GPU-seconds per group of one queue (`prefix:name`) in one UTC day."""
        return f"{self.ns}:{{gputime}}:group:{stamp}:{qualified}"

    def group_budgets(self, qualified: str) -> str:
        """GPU-seconds per UTC day each group of one queue may use (quota.py)."""
        return f"{self.ns}:{{gputime}}:budget:{qualified}"
