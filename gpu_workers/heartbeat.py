"""Writing heartbeats: the commands supervisors and workers queue on their
pipelines to publish, refresh and remove their records in Redis.

A heartbeat is a JSON string with a TTL plus an entry in an index zset
scored by its expiry, so a dead host's records vanish on their own and a
listing never scans the keyspace. A host or worker is live while its index
entry's score (expiry, ms) is in the future, and its record key then holds
its latest record. The writers keep the indexes trim, so the read model
(fleet.py) only reads and skips whatever expired since.

Two ways to beat:

- on its own (`queue_heartbeat`): a GpuWorker run alone writes its record,
  trims and refreshes its index entry and appends to the stream every beat;
- vouched (`queue_record` + `queue_vouch`): a supervisor refreshes its
  host's entry and, in ONE ZADD, the entries of its children that showed
  themselves alive (their process runs and wrote its liveness file lately);
  records are rewritten (and streamed) only when they changed (`settled`
  ignores the time and GPU readings' noise) or every RECORD_REFRESH_S, with
  a TTL that outlasts any entry vouched for meanwhile. Each record then
  carries `refresh_s` (how often it is rewritten at least) and its `ts_ms`
  is when it was last written, not when the process was last seen: that is
  its index entry's score minus the heartbeat TTL.

Every record written here carries that TTL (`ttl_s`), so a reader tells when
a host or worker was last seen from its index entry (fleet_snapshot.py's
`seen_ms`) however it beats.
"""

from __future__ import annotations

from typing import Any

from queues import codec

from . import defaults
from .clock import now_ms
from .keys import BullpenKeys


def _queue_write(
    pipe: Any,
    keys: BullpenKeys,
    kind: str,
    ident: str,
    record: dict[str, Any],
    ttl_s: float,
    record_ttl: float,
    stream: bool,
    trim: bool,
) -> None:
    """Queue the writes of a record (kept `record_ttl` s) and its index
    entry (for `ttl_s`), the trim of the index's expired entries with `trim`,
    and its stream entry with `stream`."""
    payload = codec.dumps({**record, "ttl_s": ttl_s})
    now = now_ms()
    index = keys.hosts if kind == "host" else keys.workers
    record_key = keys.host(ident) if kind == "host" else keys.worker(ident)
    pipe.set(record_key, payload, px=max(int(record_ttl * 1000), 1))
    if trim:
        pipe.zremrangebyscore(index, "-inf", now)
    pipe.zadd(index, {ident: now + max(int(ttl_s * 1000), 1)})
    if stream:
        pipe.xadd(
            keys.stream,
            {"kind": kind, "id": ident, "record": payload},
            maxlen=defaults.STREAM_MAXLEN,
            approximate=True,
        )


def queue_heartbeat(
    pipe: Any,
    keys: BullpenKeys,
    kind: str,
    ident: str,
    record: dict[str, Any],
    ttl_s: float,
    stream: bool = True,
) -> None:
    """Queue the commands writing one heartbeat on a (sync or async) pipeline,
    and trimming the expired entries of the index it writes."""
    _queue_write(pipe, keys, kind, ident, record, ttl_s, ttl_s, stream, trim=True)


def queue_removal(
    pipe: Any, keys: BullpenKeys, kind: str, ident: str, state: str = "stopped"
) -> None:
    """Queue the commands deleting a record (a clean stop) and announcing it."""
    if kind == "host":
        pipe.delete(keys.host(ident))
        pipe.zrem(keys.hosts, ident)
    else:
        pipe.delete(keys.worker(ident))
        pipe.zrem(keys.workers, ident)
    pipe.xadd(
        keys.stream,
        {
            "kind": kind,
            "id": ident,
            "record": codec.dumps({"id": ident, "state": state}),
        },
        maxlen=defaults.STREAM_MAXLEN,
        approximate=True,
    )


def record_ttl_s(heartbeat_ttl_s: float) -> float:
    """TTL of a record rewritten every RECORD_REFRESH_S at least: longer
    than any index entry vouched for before its next rewrite."""
    return defaults.RECORD_REFRESH_S + 2 * heartbeat_ttl_s


def queue_record(
    pipe: Any,
    keys: BullpenKeys,
    kind: str,
    ident: str,
    record: dict[str, Any],
    ttl_s: float,
    stream: bool = True,
) -> None:
    """Queue the commands writing a record that is vouched for (see above):
    its key with record_ttl_s(ttl_s), its index entry for ttl_s (so a new
    one is listed at once), and, with `stream`, an entry in the stream."""
    _queue_write(
        pipe, keys, kind, ident, record, ttl_s, record_ttl_s(ttl_s), stream, False
    )


def queue_vouch(
    pipe: Any, keys: BullpenKeys, kind: str, expiries: dict[str, int]
) -> None:
    """Queue one ZADD refreshing index entries (ident -> expiry ms). Worker
    entries are only refreshed, never added (XX): one removed by a clean
    stop stays removed, and a worker adds itself when it writes its record."""
    if not expiries:
        return
    if kind == "host":
        pipe.zadd(keys.hosts, expiries)
    else:
        pipe.zadd(keys.workers, expiries, xx=True)


def queue_trim(pipe: Any, keys: BullpenKeys) -> None:
    """Queue the trims of both indexes' expired entries."""
    now = now_ms()
    pipe.zremrangebyscore(keys.hosts, "-inf", now)
    pipe.zremrangebyscore(keys.workers, "-inf", now)


#: GPU readings that jitter at idle: rounded to these steps in `settled`.
_STEPS = {
    "utilization_gpu_pct": 10,
    "utilization_memory_pct": 10,
    "temperature_c": 5,
    "memory_used_bytes": 256 << 20,
    "memory_free_bytes": 256 << 20,
    "memory_reserved_bytes": 256 << 20,
}
#: Readings left out of `settled` (they move at idle; a refresh shows them).
_VOLATILE = ("power_w", "sm_clock_mhz", "ts_ms")


def _settled_gpu(gpu: Any) -> Any:
    if not isinstance(gpu, dict):
        return gpu
    out = {}
    for k, v in gpu.items():
        if k in _VOLATILE:
            continue
        step = _STEPS.get(k)
        if step and isinstance(v, (int, float)) and not isinstance(v, bool):
            v = round(v / step)
        elif k == "processes" and isinstance(v, dict):
            v = {
                p: round(b / (256 << 20)) if isinstance(b, int) else b
                for p, b in v.items()
            }
        out[k] = v
    return out


def settled(record: dict[str, Any]) -> str:
    """What must change for a vouched record to be rewritten before its
    refresh: the record without its time, telemetry and GPU readings' noise."""
    out = {k: v for k, v in record.items() if k not in ("ts_ms", "telemetry")}
    if "gpu" in out:
        out["gpu"] = _settled_gpu(out["gpu"])
    if isinstance(out.get("gpus"), list):
        out["gpus"] = [_settled_gpu(g) for g in out["gpus"]]
    return codec.dumps(out)
