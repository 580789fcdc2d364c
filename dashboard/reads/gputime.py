"""The GPU-time page's read model: what the GPU workers counted
(gpu_workers/gputime.py) over a range of UTC hours or days, grouped by
queue, job name or tenant, sorted by GPU-seconds, with totals per bucket.

It never reads jobs: one script call sums, in Redis, the bucket hashes of the
range (25 hours, 8 or 31 days), each of at most `max_keys` + 1 keys, whatever
the number of jobs. Hours over more than a day are read as whole UTC days
(as the daily views are): the keys' sums from the 8 day hashes, each hour's
total from its one-key `all` hash, rather than every key of 192 hour
hashes. The CSV reads every bucket's hashes in one pipelined round trip.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gpu_workers.gputime import (
    ALL,
    DAY,
    DIMENSIONS,
    HOUR,
    OTHER,
    PERIOD_S,
    Row,
    bucket_starts,
    read_buckets,
    read_summed,
    read_summed_many,
    sum_rows,
)
from gpu_workers.keys import BullpenKeys

from ..shared import conf
from ..shared import redis as pages_redis

#: Ranges the page offers: name -> seconds back from now.
RANGES = {"24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400}
DEFAULT_RANGE = "24h"
GROUPS = {"queue": "Queue", "name": "Job name", "tenant": "Tenant"}
DEFAULT_GROUP = "queue"
#: Hour buckets are shown for ranges up to this long (7 days: 168 rows).
HOURLY_MAX_S = 7 * 86400
assert set(GROUPS) == set(DIMENSIONS)


@dataclass(frozen=True)
class Choice:
    """What the page shows: a range, its granularity and a grouping."""

    range: str = DEFAULT_RANGE
    period: str = HOUR
    group: str = DEFAULT_GROUP

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> Choice:
        """The choice a query string makes; anything unknown is the default."""
        rng = params.get("range", DEFAULT_RANGE)
        rng = rng if rng in RANGES else DEFAULT_RANGE
        group = params.get("group", DEFAULT_GROUP)
        group = group if group in GROUPS else DEFAULT_GROUP
        period = params.get("by", "")
        hourly_ok = RANGES[rng] <= min(HOURLY_MAX_S, _hours_kept_s())
        if period not in (HOUR, DAY) or (period == HOUR and not hourly_ok):
            period = HOUR if hourly_ok and RANGES[rng] <= 86400 else DAY
        return cls(rng, period, group)

    def query(self, **change: str) -> str:
        """This choice's query string, with `change` applied."""
        values = {"range": self.range, "by": self.period, "group": self.group}
        values.update(change)
        return "&".join(f"{k}={v}" for k, v in values.items())


def _hours_kept_s() -> int:
    return conf.get().gpu_time_hours_kept * 3600


@dataclass
class Bucket:
    """One hour or day: its start and the sum of its rows."""

    start: datetime
    total: Row
    rows: dict[str, Row]
    share: float = 0.0


@dataclass(frozen=True)
class Line:
    """A row as the page shows it: its share, and its queue page if any."""

    row: Row
    share: float
    prefix: str = ""
    queue: str = ""


@dataclass
class GpuTimeView:
    """The page: rows by key (most GPU-seconds first), totals, buckets."""

    choice: Choice
    since: datetime
    until: datetime
    rows: list[Row]
    total: Row
    buckets: list[Bucket] = field(default_factory=list)
    hours_kept: int = 0
    days_kept: int = 0
    max_keys: int = 0

    @property
    def folded(self) -> bool:
        """Whether some keys were counted in "(other)"."""
        return any(r.key == OTHER for r in self.rows)

    @property
    def lines(self) -> list[Line]:
        """The rows with their shares of the GPU-seconds (percent)."""
        whole = self.total.gpu_seconds
        out = []
        for row in self.rows:
            share = 100 * row.gpu_seconds / whole if whole else 0.0
            prefix, _, queue = row.key.rpartition(":")
            if self.choice.group != "queue" or not prefix or not queue:
                prefix = queue = ""
            out.append(Line(row, share, prefix, queue))
        return out


def _total(rows: Iterable[Row]) -> Row:
    total = Row("total")
    for row in rows:
        total.add(row)
    return total


def gpu_time(
    choice: Choice, now_s: float | None = None, with_rows: bool = False
) -> GpuTimeView:
    """The page's data for `choice` (one round trip); `with_rows` also keeps
    each bucket's rows (for the CSV)."""
    c = conf.get()
    now = time.time() if now_s is None else now_s
    since = now - RANGES[choice.range]
    by_days = choice.period == HOUR and RANGES[choice.range] > PERIOD_S[DAY]
    days = bucket_starts(DAY, since, now) if by_days else []
    starts = bucket_starts(choice.period, days[0] if days else since, now)
    keys = BullpenKeys(c.namespace)
    client = pages_redis.client()
    if with_rows:  # the CSV: every bucket's rows
        read = read_buckets(client, keys, choice.period, starts, choice.group)
        per_bucket = [(b, _total(parts.values()), parts) for b, parts in read]
        summed = sum_rows(parts for _, parts in read)
    elif by_days:  # many hours: keys summed over their days, hours' totals
        (_, summed), (totals, _) = read_summed_many(
            client, keys, [(DAY, days, choice.group), (HOUR, starts, ALL)]
        )
        per_bucket = [(b, t, {}) for b, t in totals]
    else:  # the page: summed in Redis
        totals, summed = read_summed(client, keys, choice.period, starts, choice.group)
        per_bucket = [(b, t, {}) for b, t in totals]
    buckets = [
        Bucket(datetime.fromtimestamp(b, UTC), t, parts)
        for b, t, parts in reversed(per_bucket)
    ]
    total = Row("total")
    for row in summed.values():
        total.add(row)
    peak = max((b.total.gpu_seconds for b in buckets), default=0.0)
    for b in buckets:
        b.share = 100 * b.total.gpu_seconds / peak if peak else 0.0
    rows = sorted(summed.values(), key=lambda r: (-r.gpu_seconds, r.key))
    first = starts[0] if starts else since
    return GpuTimeView(
        choice=choice,
        since=datetime.fromtimestamp(first, UTC),
        until=datetime.fromtimestamp(
            (starts[-1] if starts else now) + PERIOD_S[choice.period], UTC
        ),
        rows=rows,
        total=total,
        buckets=buckets,
        hours_kept=c.gpu_time_hours_kept,
        days_kept=c.gpu_time_days_kept,
        max_keys=c.gpu_time_max_keys,
    )
