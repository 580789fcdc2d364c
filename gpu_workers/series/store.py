"""Writing and reading points: one sorted set per series and level (keys.py),
scored by each point's start. A write into one bucket in TRIM_EVERY trims
its set to the level's retention and size (the bound a wrong clock meets),
so a set holds at most TRIM_EVERY - 1 points past them (reads take ranges);
every write rewrites the coarser levels' bucket that holds the
new point from the finer points in it, so every series stays bounded and the
open 10-minute and hour buckets are current. Single-key commands only, so a
Redis Cluster serves them whatever slots the keys fall in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import defaults
from .points import Point, dump, parse

#: level name -> (width ms, retention ms, most points)
LEVELS = {
    name: (width, keep, most) for name, width, keep, most in defaults.SERIES_LEVELS
}
LEVEL_NAMES = tuple(LEVELS)

#: The trims run when a point's bucket number is a multiple of this.
TRIM_EVERY = 10

#: What names a series' key at a level.
KeyOf = Callable[[str], str]
#: What combines the points of a bucket into its point.
Combine = Callable[[Sequence[Point], int], Point]


def _put(pipe: Any, key: str, level: str, point: Point, now_ms: int) -> None:
    width, keep, most = LEVELS[level]
    t = int(point["t"])
    pipe.zremrangebyscore(key, t, t)
    pipe.zadd(key, {dump(point): t})
    if (t // width) % TRIM_EVERY == 0:
        pipe.zremrangebyscore(key, "-inf", f"({now_ms - keep}")
        pipe.zremrangebyrank(key, 0, -(most + 1))


def write(
    client: Any,
    series: Sequence[tuple[KeyOf, Point]],
    combine: Combine,
    now_ms: int,
) -> None:
    """Store minute points (with the key namer of each one's series) and
    refresh the coarser buckets holding them: one pipeline per level."""
    pipe = client.pipeline(transaction=False)
    for key_of, point in series:
        _put(pipe, key_of(LEVEL_NAMES[0]), LEVEL_NAMES[0], point, now_ms)
    pipe.execute()
    for finer, level in zip(LEVEL_NAMES, LEVEL_NAMES[1:]):
        width = LEVELS[level][0]
        starts = [int(p["t"]) - int(p["t"]) % width for _, p in series]
        pipe = client.pipeline(transaction=False)
        for (key_of, _), start in zip(series, starts):
            pipe.zrangebyscore(key_of(finer), start, f"({start + width}")
        found = pipe.execute()
        pipe = client.pipeline(transaction=False)
        for (key_of, _), start, raw in zip(series, starts, found):
            points = [p for p in (parse(r) for r in raw) if p is not None]
            if points:
                _put(pipe, key_of(level), level, combine(points, start), now_ms)
        pipe.execute()


def read(
    client: Any, keys: Sequence[str], start_ms: int, end_ms: int
) -> list[list[Point]]:
    """The points of each key starting in [start_ms, end_ms), oldest first,
    in one pipeline (odd members skipped)."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.zrangebyscore(key, start_ms, f"({end_ms}")
    return [
        [p for p in (parse(r) for r in raw) if p is not None] for raw in pipe.execute()
    ]
