"""The `queued` reason's sentence and numbers: a job's place in line (exact,
or a range past the scans, place.py) and when it starts at the measured
throughput (an ETA, or an ETA range). Pure: no Redis, no clock."""

from __future__ import annotations

import math
from typing import Any

from queues import Job

from .reads import JobFacts, QueueFacts

MINUTE_MS = 60_000
#: Units a range's ends are rounded to, largest first.
_ROUGH = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000))


def span(ms: int) -> str:
    """A short duration: 850 ms, 12 s, 3 min 5 s, 2 h 4 min, 3 d 1 h."""
    if ms < 1000:
        return f"{max(ms, 0)} ms"
    s = ms // 1000
    for unit, size, sub, sub_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "min", 60),
        ("min", 60, "s", 1),
    ):
        if s >= size:
            rest = (s % size) // sub_size
            return f"{s // size} {unit}" + (f" {rest} {sub}" if rest else "")
    return f"{s} s"


def _rough(ms: int, up: bool) -> tuple[int, str]:
    """`ms` in its largest whole unit, rounded down (or `up`)."""
    for unit, size in _ROUGH:
        if ms >= size:
            return (math.ceil(ms / size) if up else ms // size), unit
    return max(ms, 0), "ms"


def span_between(low_ms: int, high_ms: int) -> str:
    """A range of durations as people say it: "between 8 and 41 min",
    "between 50 min and 3 h"; each end in its own largest unit, the range
    widened outwards to whole units so it still holds both."""
    low, low_unit = _rough(low_ms, up=False)
    high, high_unit = _rough(high_ms, up=True)
    if low_unit != high_unit:
        return f"between {low} {low_unit} and {high} {high_unit}"
    if low == high:
        return f"about {low} {low_unit}"
    return f"between {low} and {high} {low_unit}"


def _eta_ms(ahead: int, per_min: float, floor_ms: int) -> int:
    """When a job with `ahead` jobs before it starts: once they and it are
    taken at `per_min`, never before `floor_ms` (a full limiter)."""
    return max(int((ahead + 1) / per_min * MINUTE_MS), floor_ms)


def in_line(
    job: Job, state: str, q: QueueFacts, j: JobFacts, floor_ms: int = 0
) -> tuple[str, dict[str, Any]]:
    """The sentence and numbers of a job's place in line: `ahead` (null for
    a range, with `ahead_at_least` and `ahead_at_most`), and `eta_ms` (or
    `eta_at_least_ms` and `eta_at_most_ms`) at least `floor_ms`."""
    place = None if state == "paused" else j.place
    ahead = None if place is None else place.exact
    own = j.prio_before_own if state == "prioritized" else None
    numbers: dict[str, Any] = {"ahead": ahead, "priority": job.priority}
    if own is not None:
        numbers["ahead_same_priority"] = own
    if state == "paused":
        text = "Queued in the paused list (BullMQ 5), behind the jobs before it"
    elif place is None:
        text = "Queued, no longer where it was read (it moved)"
    elif ahead is None:
        numbers["ahead_at_least"] = place.ahead_at_least
        numbers["ahead_at_most"] = place.ahead_at_most
        low, high = place.ahead_at_least, place.ahead_at_most
        text = f"Between {low:,} and {high:,} jobs ahead of it"
    elif ahead == 0:
        text = "Next in line"
    else:
        text = f"{ahead:,} job{'s' if ahead != 1 else ''} ahead of it"
        if own is not None:
            text += f" ({own:,} of its priority {job.priority})"
    rate = q.finished_per_min
    numbers["finished_per_min"] = rate
    stopped = q.paused or state == "paused" or not q.live_workers
    if rate and place is not None and not stopped:
        low = _eta_ms(place.ahead_at_least, rate, floor_ms)
        high = _eta_ms(place.ahead_at_most, rate, floor_ms)
        text += f"; at {rate:.1f} jobs/min it starts in "
        if ahead is not None:
            numbers["eta_ms"] = low
            text += f"about {span(low)}"
        else:
            numbers["eta_at_least_ms"] = low
            numbers["eta_at_most_ms"] = high
            text += span_between(low, high)
    elif not rate and not stopped:
        text += "; no job finished in the last minutes, so no ETA"
    return text, numbers
