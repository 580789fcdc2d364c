"""Reading series for a chart: a range (1h / 24h / 7d) as columns on a
regular time grid, a missing point as None (a gap, not a zero).

The 1 h range reads minute points and computes the minutes no sampler has
written yet (the open one and, before it settles, the last) from Redis as
they are now, so a chart moves as jobs finish; 24 h reads 10-minute points
and 7 d hourly ones (store.py keeps both current). Counts are per minute at
every level; a queue chart of several queues (the overview's) combines them
(points.over_queues).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from queues.drive import gather, run_sync
from queues.keys import QueueKeys
from queues.metrics import MINUTE_MS, TARGETS, parse_metrics

from .. import defaults
from ..fleet import Fleet
from ..keys import BullpenKeys
from . import points, store
from .sample import queue_point_op
from .sampler import gpu_point

RANGES = defaults.SERIES_RANGES
#: Range name -> its length (ms).
RANGE_MS = {"1h": 3600_000, "24h": 24 * 3600_000, "7d": 7 * 24 * 3600_000}
#: Columns of a queue chart: name -> point field.
QUEUE_COLUMNS = {
    "completed": "c",
    "failed": "f",
    "wait_p50": "w50",
    "wait_p95": "w95",
    "run_p50": "r50",
    "run_p95": "r95",
    "backlog": "b",
    "active": "a",
    "oldest": "o",
}


def grid(range_name: str, now_ms: int) -> tuple[str, int, list[int]]:
    """The level, its width (ms) and the bucket starts a range shows, the
    bucket holding `now_ms` last."""
    level = RANGES[range_name]
    width = store.LEVELS[level][0]
    last = now_ms - now_ms % width
    count = RANGE_MS[range_name] // width
    return level, width, [last - (count - 1 - i) * width for i in range(count)]


def _per_minute(point: points.Point | None, name: str) -> float | None:
    if point is None or point.get(name) is None:
        return None
    value = float(point[name])
    if name in ("c", "f"):
        return round(value / max(float(point.get("m") or 1), 1.0), 2)
    return value


def queue_series(
    client: Any,
    keys: BullpenKeys,
    refs: Sequence[tuple[str, str]],
    range_name: str,
    now_ms: int,
    sample_jobs: int = defaults.SERIES_SAMPLE_JOBS,
) -> dict[str, Any]:
    """The chart of one queue, or of several combined: {"range", "step_s",
    "t" (seconds), one column per QUEUE_COLUMNS, "live_from"}."""
    level, width, starts = grid(range_name, now_ms)
    by_t = _queue_points(client, keys, refs, level, starts[0], starts[-1] + width)
    live = [s for s in starts[-2:] if s not in by_t] if level == "1m" else []
    by_t.update(_live(client, refs, live, now_ms, sample_jobs))
    if len(refs) == 1:  # no sampler ran then: BullMQ's own counts, if kept
        gaps = [s for s in starts if s not in by_t]
        by_t.update(_from_bullmq(client, refs[0], gaps, width, starts[0]))
    merged = {t: points.over_queues(ps, t) for t, ps in by_t.items()}
    out = _columns(range_name, width, starts, merged, live)
    if len(refs) == 1:
        out["groups"] = group_columns(starts, {t: ps[0] for t, ps in by_t.items()})
    return out


#: The `id` of the series adding up the groups a chart does not name.
OTHER_GROUPS = "(other)"


def group_columns(
    starts: Sequence[int], by_t: dict[int, points.Point]
) -> list[dict[str, Any]]:
    """Waiting jobs by group on the grid: the GROUPS_KEPT groups with the
    largest backlog over the range, then OTHER_GROUPS, the rest of every
    group's waiting jobs (a group a point does not name is in its rest);
    [] when no point sampled groups. A point's missing value is None."""
    sampled = {t: p for t, p in by_t.items() if isinstance(p.get("g"), dict)}
    if not sampled:
        return []
    named = [gid for gid, _ in points.largest_groups(list(sampled.values()))]
    columns: list[dict[str, Any]] = [
        {
            "id": gid,
            "waiting": [
                (sampled[s]["g"].get(gid, 0) if s in sampled else None) for s in starts
            ],
        }
        for gid in named
    ]
    rest: list[float | None] = []
    for i, s in enumerate(starts):
        total = sampled[s].get("gw") if s in sampled else None
        if not isinstance(total, (int, float)):
            rest.append(None)
            continue
        shown = sum(c["waiting"][i] or 0 for c in columns)
        rest.append(round(max(total - shown, 0), 2))
    return [*columns, {"id": OTHER_GROUPS, "waiting": rest}]


def _from_bullmq(
    client: Any, ref: tuple[str, str], gaps: Sequence[int], width: int, first: int
) -> dict[int, list[points.Point]]:
    """Completed and failed counts of the buckets no sampler wrote, from
    BullMQ's per-minute metrics where workers keep them (a bounded read: the
    range's minutes of two lists). Minutes after the metrics' last one are
    unknown, not zero: a worker that keeps none may have run jobs then."""
    if not gaps:
        return {}
    q = QueueKeys(ref[1], ref[0])
    minutes = (gaps[-1] + width - first) // MINUTE_MS + 1
    pipe = client.pipeline(transaction=False)
    for target in TARGETS:
        pipe.hmget(q.metrics(target), "count", "prevTS", "prevCount")
        pipe.lrange(q.metrics_data(target), 0, minutes)
    found = pipe.execute()
    per = [
        parse_metrics(meta, data).per_bucket(gaps, width)
        for meta, data in zip(found[0::2], found[1::2])
    ]
    out: dict[int, list[points.Point]] = {}
    for b in gaps:
        point: points.Point = {"t": b, "m": width // MINUTE_MS}
        for name, counts in zip(("c", "f"), per):
            if b in counts:
                point[name] = counts[b]
        if "c" in point or "f" in point:
            out[b] = [point]
    return out


def overall_series(
    client: Any,
    keys: BullpenKeys,
    refs: Sequence[tuple[str, str]],
    range_name: str,
    now_ms: int,
    sample_jobs: int = defaults.SERIES_SAMPLE_JOBS,
) -> dict[str, Any]:
    """Every queue's chart combined, as `queue_series` would give it for
    `refs`, from the overall series the dashboards' samplers keep (one read
    whatever the number of queues). Its newest minutes are written a minute
    after the queues' own (SeriesSampler.tick_overall): on the 1 h range the
    last `OVERALL_TAIL` minutes missing there are combined from the queues'
    points, and those the queues lack too are read live, with the jobs
    sampled for times shared among the queues."""
    level, width, starts = grid(range_name, now_ms)
    stored = store.read(
        client, [keys.series_overall(level)], starts[0], starts[-1] + width
    )[0]
    merged = {int(p["t"]): p for p in stored}
    tail = [s for s in starts[-OVERALL_TAIL:] if s not in merged]
    live: list[int] = []
    if level == "1m" and tail and refs:
        by_t = _queue_points(client, keys, refs, level, tail[0], tail[-1] + width)
        live = [s for s in tail[-2:] if len(by_t.get(s, ())) < len(refs)]
        share = max(sample_jobs // len(refs), 1)
        for t, found in _live(client, refs, live, now_ms, share).items():
            by_t[t] = found  # every queue read now, over what some had kept
        merged.update({t: points.over_queues(ps, t) for t, ps in by_t.items()})
    return _columns(range_name, width, starts, merged, live)


#: Newest minutes of the overall 1 h chart that may not be combined yet.
OVERALL_TAIL = 3


def _queue_points(
    client: Any,
    keys: BullpenKeys,
    refs: Sequence[tuple[str, str]],
    level: str,
    start_ms: int,
    end_ms: int,
) -> dict[int, list[points.Point]]:
    """The queues' stored points in [start_ms, end_ms), by start."""
    stored = store.read(
        client, [keys.series(p, q, level) for p, q in refs], start_ms, end_ms
    )
    by_t: dict[int, list[points.Point]] = {}
    for series in stored:
        for point in series:
            by_t.setdefault(int(point["t"]), []).append(point)
    return by_t


def _live(
    client: Any,
    refs: Sequence[tuple[str, str]],
    minutes: Sequence[int],
    now_ms: int,
    sample_jobs: int,
) -> dict[int, list[points.Point]]:
    """Each queue's point of each minute read from Redis as it is now."""
    if not minutes or not refs:
        return {}
    found = run_sync(
        gather(
            [
                queue_point_op(QueueKeys(q, p), s, s + MINUTE_MS, now_ms, sample_jobs)
                for s in minutes
                for p, q in refs
            ]
        ),
        client,
    )
    n = len(refs)
    return {s: found[i * n : (i + 1) * n] for i, s in enumerate(minutes)}


def _columns(
    range_name: str,
    width: int,
    starts: Sequence[int],
    merged: dict[int, points.Point],
    live: Sequence[int],
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "range": range_name,
        "step_s": width // 1000,
        "t": [s // 1000 for s in starts],
        "live_from": (live[0] // 1000) if live else None,
    }
    for column, name in QUEUE_COLUMNS.items():
        out[column] = [_per_minute(merged.get(s), name) for s in starts]
    return out


def gpu_series(
    client: Any,
    keys: BullpenKeys,
    range_name: str,
    now_ms: int,
    live_gpus: list[dict[str, Any]] | None = None,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Per GPU utilisation (%) and committed VRAM (bytes) over a range:
    {"range", "step_s", "t", "gpus": [{uuid, host, index, name, total,
    util, committed}]}; the open minute is the GPUs' reading now.
    `live_gpus`: the live GPUs' rows (Fleet.list_gpus' shape) when the
    caller has them (else read); `only`: just these GPUs (else every GPU
    sampled in the range or live)."""
    level, width, starts = grid(range_name, now_ms)
    rows = Fleet(client, keys.ns).list_gpus() if live_gpus is None else live_gpus
    live = {g["uuid"]: g for g in rows if isinstance(g.get("uuid"), str)}
    if only is not None:
        uuids = sorted(set(only))
    else:
        sampled = client.zrangebyscore(keys.series_gpus(), starts[0], "+inf")
        uuids = sorted(set(sampled) | set(live))
    infos = client.hmget(keys.series_gpu_info(), uuids) if uuids else []
    stored = store.read(
        client,
        [keys.gpu_series(u, level) for u in uuids],
        starts[0],
        starts[-1] + width,
    )
    gpus = []
    for uuid, raw, series in zip(uuids, infos, stored):
        info = live.get(uuid) or points.parse_info(raw)
        by_t = {int(p["t"]): p for p in series}
        if level == "1m" and uuid in live:
            by_t.setdefault(starts[-1], gpu_point(live[uuid], starts[-1]))
        totals = [p.get("tot") for p in by_t.values() if p.get("tot")]
        gpus.append(
            {
                "uuid": uuid,
                "host": str(info.get("host") or "?"),
                "index": info.get("index"),
                "name": str(info.get("name") or ""),
                "total": totals[-1] if totals else None,
                "util": [(by_t.get(s) or {}).get("u") for s in starts],
                "committed": [(by_t.get(s) or {}).get("c") for s in starts],
            }
        )
    gpus.sort(key=lambda g: (g["host"], str(g["index"]), g["uuid"]))
    return {
        "range": range_name,
        "step_s": width // 1000,
        "t": [s // 1000 for s in starts],
        "gpus": gpus,
    }
