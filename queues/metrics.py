"""Worker metrics (docs/protocol.md §1.2 `metrics:*`, 4.7 step 13): the worker option
that turns collection on, and the per-minute series `Queue.get_metrics` reads.

Workers write the series in `move_to_finished.lua` (include `metrics.lua`) in
BullMQ's layout, so Node and Bullpen workers add to one series and either
client reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .keys import QueueKeys
from .ops import Atomic, Cmd, Op
from .state import JobState

#: The job outcomes metrics are kept for.
TARGETS = ("completed", "failed")
MINUTE_MS = 60_000


@dataclass(frozen=True)
class MetricsOptions:
    """The worker option `metrics`: keep `max_data_points` per-minute counts
    of completed and of failed jobs (BullMQ's `metrics: {maxDataPoints}`)."""

    max_data_points: int

    def __post_init__(self) -> None:
        n = self.max_data_points
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError("metrics max_data_points must be an integer >= 1")


@dataclass(frozen=True)
class MetricsMeta:
    """The metrics hash: all jobs finished so far (`count`), and the time and
    count when the last full minute was written (`prev_ts`, `prev_count`)."""

    count: int
    prev_ts: int
    prev_count: int


@dataclass(frozen=True)
class Metrics:
    """What Node's `getMetrics` returns: the hash, the requested slice of
    per-minute counts (newest first) and the length of the whole list."""

    meta: MetricsMeta
    data: list[int]
    count: int

    def per_bucket(self, starts_ms: Sequence[int], width_ms: int) -> dict[int, int]:
        """Jobs counted in each bucket [start, start + width) these metrics
        cover (`data` read from its head): prev_ts's minute is still open
        (count - prev_count so far), `data` holds the minutes before it,
        newest first. A bucket wholly after prev_ts's minute, or older than
        the data read, is left out (unknown), as are all when none are kept."""
        if not self.meta.prev_ts:
            return {}
        latest = self.meta.prev_ts // MINUTE_MS
        out = {}
        for start in starts_ms:
            first = start // MINUTE_MS
            last = min((start + width_ms) // MINUTE_MS - 1, latest)
            if last < first:
                continue
            total = self.meta.count - self.meta.prev_count if last == latest else 0
            newest = min(last, latest - 1)  # the bucket's newest minute in `data`
            if newest >= first:
                if latest - 1 - newest >= len(self.data):
                    continue
                total += sum(self.data[latest - 1 - newest : latest - first])
            out[start] = total
        return out

    def to_dict(self) -> dict[str, Any]:
        """BullMQ's JSON shape: {meta: {count, prevTS, prevCount}, data, count}."""
        return {
            "meta": {
                "count": self.meta.count,
                "prevTS": self.meta.prev_ts,
                "prevCount": self.meta.prev_count,
            },
            "data": list(self.data),
            "count": self.count,
        }


def metrics_target(target: str | JobState) -> str:
    """`completed` or `failed` (a JobState or its name); ValueError otherwise."""
    name = target.value if isinstance(target, JobState) else target
    if name not in TARGETS:
        raise ValueError(f"metrics are kept for 'completed' or 'failed', not {name!r}")
    return name


def _number(value: Any) -> int:
    """A stored number as Node reads it: missing or not numeric is 0."""
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        return 0


def get_metrics(
    keys: QueueKeys, target: str | JobState, start: int, end: int
) -> Op[Metrics]:
    """The metrics of one target, read in one transaction."""
    name = metrics_target(target)
    meta, data, length = yield Atomic(
        [
            Cmd(("HMGET", keys.metrics(name), "count", "prevTS", "prevCount")),
            Cmd(("LRANGE", keys.metrics_data(name), start, end)),
            Cmd(("LLEN", keys.metrics_data(name))),
        ]
    )
    return parse_metrics(meta, data, int(length))


def parse_metrics(
    meta: Sequence[Any], data: Sequence[Any], length: int | None = None
) -> Metrics:
    """Metrics from the replies to HMGET count prevTS prevCount and an
    LRANGE of the data list (`length`: the whole list's, if read)."""
    count, prev_ts, prev_count = (_number(v) for v in meta)
    values = [_number(v) for v in data]
    return Metrics(
        MetricsMeta(count, prev_ts, prev_count),
        values,
        len(values) if length is None else length,
    )
