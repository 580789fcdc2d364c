"""Worker metrics (docs/protocol.md §1.2 `metrics:*`, 4.7 step 13): the worker option
that turns collection on, and the per-minute series `Queue.get_metrics` reads.

Workers write the series in `move_to_finished.lua` (include `metrics.lua`) in
BullMQ's layout, so Node and Bullpen workers add to one series and either
client reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .keys import QueueKeys
from .ops import Atomic, Cmd, Op
from .state import JobState

#: The job outcomes metrics are kept for.
TARGETS = ("completed", "failed")


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
    count, prev_ts, prev_count = (_number(v) for v in meta)
    return Metrics(
        MetricsMeta(count, prev_ts, prev_count),
        [_number(v) for v in data],
        int(length),
    )
