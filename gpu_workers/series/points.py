"""Points of the sampled series, and how they combine.

A queue point (JSON, short names as it is stored once a minute per queue):
`t` start (ms), `m` minutes it covers, `c` / `f` jobs completed / failed in
them, `n` finished jobs whose times were sampled, `w50` `w95` wait and `r50`
`r95` run time percentiles (seconds), `b` backlog (waiting + prioritized +
delayed), `a` active, `o` age of the oldest waiting job (seconds), and on a queue with
groups `g` the waiting jobs of its GROUPS_KEPT largest backlogs ({id: n})
and `gw` every group's waiting jobs (the rest is `gw` minus those). A GPU point:
`t`, `m`, `u` utilisation (%), `mu` memory used, `c` committed VRAM, `bu`
budget, `tot` total (bytes).

Combining points over time (a rollup) sums the counts and averages the
levels; combining queues (the overall chart) sums counts and levels. Either
way p50 is the mean weighted by jobs sampled (an estimate) and p95 the
highest (a bound, as percentiles cannot be merged exactly), the oldest
waiting age the highest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from queues import codec

Point = dict[str, Any]

#: Counts: summed over time and over queues.
COUNTS = ("c", "f", "n")
#: Levels: averaged over time, summed over queues.
LEVELS = ("b", "a")
#: Queue point fields, in the order charts read them.
QUEUE_FIELDS = ("c", "f", "w50", "w95", "r50", "r95", "b", "a", "o", "n")
#: Groups a queue point keeps the backlog of (the largest), so a point stays
#: small however many groups the queue has.
GROUPS_KEPT = 5
#: GPU point fields averaged over time.
GPU_FIELDS = ("u", "mu", "c", "bu", "tot")


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of sorted values (None when there are none)."""
    if not ordered:
        return None
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def parse(raw: Any) -> Point | None:
    """A stored point, or None when it is not one (written by something else)."""
    try:
        point = codec.loads(raw)
    except (codec.JSONDecodeError, TypeError, ValueError):
        return None
    if not isinstance(point, dict) or _num(point.get("t")) is None:
        return None
    return point


def dump(point: Point) -> str:
    """A point as stored (compact JSON)."""
    return codec.dumps(point)


def _values(points: Sequence[Point], name: str) -> list[float]:
    found = (_num(p.get(name)) for p in points)
    return [v for v in found if v is not None]


def _weighted_p50(points: Sequence[Point], name: str) -> float | None:
    pairs = [
        (v, max(_num(p.get("n")) or 0.0, 1.0))
        for p in points
        if (v := _num(p.get(name))) is not None
    ]
    if not pairs:
        return None
    total = sum(w for _, w in pairs)
    return round(sum(v * w for v, w in pairs) / total, 3)


def _jobs_part(points: Sequence[Point], out: Point) -> None:
    for name in COUNTS:
        values = _values(points, name)
        out[name] = int(sum(values)) if values else None
    for name in ("w50", "r50"):
        out[name] = _weighted_p50(points, name)
    for name in ("w95", "r95", "o"):
        values = _values(points, name)
        out[name] = max(values) if values else None


def over_time(points: Sequence[Point], start_ms: int) -> Point:
    """One point for `points` (those of one bucket, starting at `start_ms`)."""
    out: Point = {"t": start_ms, "m": int(sum(_values(points, "m")))}
    _jobs_part(points, out)
    for name in LEVELS:
        values = _values(points, name)
        out[name] = round(sum(values) / len(values), 2) if values else None
    _groups_part(points, out)
    return out


def largest_groups(sampled: Sequence[Point]) -> list[tuple[str, float]]:
    """The GROUPS_KEPT groups with the largest backlog summed over points
    that sampled groups (`g`), largest first, with their sums (a group a
    point does not name counts 0 there: it is in that point's rest)."""
    sums: dict[str, float] = {}
    for p in sampled:
        for gid, n in p["g"].items():
            value = _num(n)
            if value is not None:
                sums[str(gid)] = sums.get(str(gid), 0.0) + value
    return sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))[:GROUPS_KEPT]


def _groups_part(points: Sequence[Point], out: Point) -> None:
    """Average each of the largest groups' backlog over the points that
    sampled groups; `gw` averaged likewise."""
    sampled = [p for p in points if isinstance(p.get("g"), dict)]
    if not sampled:
        return
    kept = largest_groups(sampled)
    out["g"] = {gid: round(total / len(sampled), 2) for gid, total in kept}
    totals = _values(sampled, "gw")
    out["gw"] = round(sum(totals) / len(totals), 2) if totals else None


def over_queues(points: Sequence[Point], start_ms: int) -> Point:
    """One point for the same moment of several queues (the overall chart)."""
    minutes = _values(points, "m")
    out: Point = {"t": start_ms, "m": max(minutes) if minutes else 1}
    _jobs_part(points, out)
    for name in LEVELS:
        values = _values(points, name)
        out[name] = round(sum(values), 2) if values else None
    return out


def gpu_over_time(points: Sequence[Point], start_ms: int) -> Point:
    """One GPU point for a bucket: each reading averaged, `ux` the highest use."""
    out: Point = {"t": start_ms, "m": int(sum(_values(points, "m")))}
    for name in GPU_FIELDS:
        values = _values(points, name)
        out[name] = round(sum(values) / len(values), 1) if values else None
    peaks = _values(points, "ux") or _values(points, "u")
    out["ux"] = max(peaks) if peaks else None
    return out


def parse_info(raw: Any) -> dict[str, Any]:
    """A GPU's stored {host, index, name}, or {} when missing or odd."""
    try:
        info = codec.loads(raw) if raw else {}
    except (codec.JSONDecodeError, TypeError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}
