"""The overview's read model: per queue counts, paused flag, throughput per
minute (finished jobs still kept, or BullMQ's metrics), the oldest waiting job
and the workers serving it, for 100 queues in a few pipelined round trips."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from dashboard.shared import conf
from dashboard.shared.discovery import QueueRef
from dashboard.shared.redis import client
from queues import ops
from queues.clients import connection_name, forget_censuses, recent_census
from queues.defaults import WORKER_CENSUS_MAX_AGE_S
from queues.drive import cmd, cmds, gather
from queues.keys import QueueKeys
from queues.ops import DEFAULT_STATES

from . import fleet_snapshot, on_reset, run

MINUTE_MS = 60_000


@dataclass
class QueueStats:
    """What the overview shows about one queue."""

    ref: QueueRef
    counts: dict[str, int]
    paused: bool
    completed_per_min: list[int]
    failed_per_min: list[int]
    oldest_waiting_ms: int | None
    workers: int | None = None
    gpu_workers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Jobs in every state."""
        return sum(self.counts.values())

    @property
    def gpu_title(self) -> str:
        """The GPU workers as the row's tooltip: counts per state, then the
        first GPU_TITLE_WORKERS ids (a queue with a thousand workers is not a
        thousand names on every overview)."""
        states = Counter(str(w.get("state", "?")) for w in self.gpu_workers)
        ids = [f"{w.get('id', '')} ({w.get('state', '?')})" for w in self.gpu_workers]
        shown = " ".join(ids[:GPU_TITLE_WORKERS])
        more = len(ids) - GPU_TITLE_WORKERS
        counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        return f"{len(ids)} GPU workers: {counts}. {shown}" + (
            f" and {more} more" if more > 0 else ""
        )


#: Worker ids an overview row's tooltip names.
GPU_TITLE_WORKERS = 8


#: Seconds after a minute ends before its count is kept: workers' clocks may lag.
SETTLE_MS = 10_000
#: Finished jobs per (completed/failed key, minute start) of minutes that are
#: over, so each overview only counts the minutes still changing.
_minutes: dict[str, Any] = {}


def _minute_cache(conn: redis.Redis, now_ms: int, minutes: int) -> dict[Any, int]:
    if _minutes.get("client") is not conn:
        _minutes.clear()
        _minutes.update(client=conn, counts={})
    counts: dict[Any, int] = _minutes["counts"]
    oldest = now_ms - (minutes + 2) * MINUTE_MS
    for stale in [k for k in counts if k[1] < oldest]:
        del counts[stale]
    return counts


def metrics_minutes_op(keys: QueueKeys, minutes: int) -> ops.Op:
    """Per-minute finished counts from BullMQ's `metrics:{completed,failed}`
    (kept by workers with the metrics option, whatever retention deletes):
    {target: {minute number: count}}, empty for a target nobody collects.
    The per-minute lists are read only where the hash exists."""
    targets = ("completed", "failed")
    metas = yield [
        ops.Cmd(("HMGET", keys.metrics(t), "count", "prevTS", "prevCount"))
        for t in targets
    ]
    parsed = {t: [_int_or_none(v) for v in meta] for t, meta in zip(targets, metas)}
    kept = [t for t in targets if None not in parsed[t][:2]]
    lists = (
        (yield [ops.Cmd(("LRANGE", keys.metrics_data(t), 0, minutes)) for t in kept])
        if kept
        else []
    )
    data = dict(zip(kept, lists))
    found: dict[str, dict[int, int]] = {t: {} for t in targets}
    for t in kept:
        count, prev_ts, prev_count = parsed[t]
        assert count is not None and prev_ts is not None
        # The minute of prevTS is still open (count - prevCount so far); the
        # list holds the minutes before it, newest first.
        latest = prev_ts // MINUTE_MS
        series = {latest: count - (prev_count or 0)}
        for k, value in enumerate(data[t]):
            series[latest - 1 - k] = _int_or_none(value) or 0
        found[t] = series
    return found


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _stats_op(
    keys: QueueKeys, now_ms: int, minutes: int, known: dict[Any, int]
) -> ops.Op:
    end = now_ms - now_ms % MINUTE_MS + MINUTE_MS
    starts = [end - (minutes - i) * MINUTE_MS for i in range(minutes)]
    wanted = [(key, s) for key in (keys.completed, keys.failed) for s in starts]
    missing = [w for w in wanted if w not in known]
    counts, paused, due, found, collected = yield from gather(
        [
            ops.get_counts(keys, DEFAULT_STATES),
            cmd("HEXISTS", keys.meta, "paused"),
            ops.oldest_waiting(keys),
            cmds([("ZCOUNT", k, s, f"({s + MINUTE_MS}") for k, s in missing]),
            metrics_minutes_op(keys, minutes),
        ]
    )
    fresh = dict(zip(missing, (int(n) for n in found)))
    for (key, start), n in fresh.items():
        if start + MINUTE_MS + SETTLE_MS <= now_ms:
            known[(key, start)] = n
    # Jobs still in completed/failed, or BullMQ's metrics where workers keep
    # them (they count jobs that retention already deleted): the larger.
    by_key = {keys.completed: collected["completed"], keys.failed: collected["failed"]}
    per_min = [
        max(
            fresh[w] if w in fresh else known[w], by_key[w[0]].get(w[1] // MINUTE_MS, 0)
        )
        for w in wanted
    ]
    oldest = None if due is None else max(now_ms - due, 0)
    return counts, bool(paused), per_min[:minutes], per_min[minutes:], oldest


def known_census() -> Counter[str] | None:
    """Connected BullMQ workers per `prefix:base64(name)` (Node's getWorkers()
    reads the same CLIENT LIST names, of every primary on a cluster), one
    census reused for a few seconds by every page; None when CLIENT LIST is
    refused (the workers are unknown)."""
    return recent_census(client(), WORKER_CENSUS_MAX_AGE_S)


def worker_census() -> Counter[str]:
    """`known_census()`, empty when the workers are unknown."""
    return known_census() or Counter()


def overview(refs: Iterable[QueueRef], now_ms: int | None = None) -> list[QueueStats]:
    """Counts, paused flag, throughput, oldest waiting age and workers of each
    queue, in a fixed number of round trips whatever the number of queues."""
    refs = list(refs)
    now_ms = now_ms or ops.now_ms()
    minutes = conf.get().sparkline_minutes
    known = _minute_cache(client(), now_ms, minutes)
    results = run(
        gather(
            [
                _stats_op(QueueKeys(r.name, r.prefix), now_ms, minutes, known)
                for r in refs
            ]
        )
    )
    census = worker_census()
    # GPU workers per queue, from the process's fleet snapshot (bounded age:
    # BULLPEN_FLEET_MAX_AGE_S), indexed once: not a read of every heartbeat.
    try:
        gpu = fleet_snapshot().workers
    except redis.RedisError:
        gpu = []
    by_queue: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for w in gpu:
        by_queue.setdefault((w.get("prefix"), w.get("queue")), []).append(w)
    rows = []
    for ref, (counts, paused, done, failed, oldest) in zip(refs, results):
        serving = by_queue.get((ref.prefix, ref.name), [])
        connected = census.get(connection_name(ref.prefix, ref.name), 0)
        rows.append(
            QueueStats(
                ref,
                counts,
                paused,
                done,
                failed,
                oldest,
                workers=max(connected, len(serving)),
                gpu_workers=serving,
            )
        )
    return rows


on_reset(forget_censuses)
on_reset(_minutes.clear)
