"""GPU-time accounting: GPU-seconds and VRAM-GiB-seconds per queue, per job
name and per tenant, per UTC hour and day, kept in Redis with a bounded size.

A GPU worker records every attempt that ran on its GPU (admitted: completed,
failed, out of memory, cancelled, or whose finish Redis refused) when it
ends. What an attempt counts (docs/operations.md "GPU-time accounting"):

- GPU-seconds: the wall seconds from its admission to its release (the
  handler's run). Jobs sharing a GPU each count their own run time, so a
  GPU's GPU-seconds may exceed its wall time.
- VRAM-GiB-seconds: the VRAM it held (its declared need, or its measured
  peak where larger) in GiB times those seconds: the fair-share measure.
- attempts, and the GPU-seconds of simulated GPUs (a subset, marked so).

An attempt across an hour's or a day's end is split between the buckets by
its seconds in each; it counts as one attempt in the bucket where it ended.
The tenant is the job's `opts.tenant` (the HTTP API stores its token's name
there), `-` for a job without one.

Storage (keys.py): per period (`hour`, `day`) and bucket, one hash per
dimension (`queue`, `name`, `tenant`, and `all` holding the bucket's total
under the one key `total`) with the fields `s|<key>`, `v|<key>`,
`n|<key>` and `sim|<key>`, expiring `hours_kept` hours / `days_kept` days
after the bucket ends; and, for /metrics counters, one running-total hash
per dimension without expiry. Each hash holds at most `max_keys` keys; the
rest fold into `(other)`, so a client inventing job names cannot grow Redis
without bound. All of an attempt's hashes share one hash tag, so one script
call updates them together, atomically, on a Redis Cluster too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from queues.options import TENANT_MAX_CHARS

from . import defaults
from .keys import BullpenKeys
from .scripts import LUA  # gputime_add counts an attempt, gputime_sum sums

HOUR, DAY, TOTAL = "hour", "day", "total"
PERIOD_S = {HOUR: 3600, DAY: 86400}
#: What attempts are grouped by.
DIMENSIONS = ("queue", "name", "tenant")
#: A bucket-only dimension with one key, the bucket's whole use: a view of
#: many hours reads each hour's total from it (4 fields), not its every key.
ALL = "all"
WHOLE = "total"
#: Hash-field prefixes: GPU-seconds, VRAM-GiB-seconds, attempts, simulated GPU-s.
METRICS = ("s", "v", "n", "sim")
#: Where keys past `max_keys` of a hash are counted.
OTHER = "(other)"
#: The tenant of a job that names none (not added through the HTTP API).
NO_TENANT = "-"
#: The job option naming a job's tenant (BullMQ keeps unknown opts keys).
TENANT_OPTION = "tenant"
NAME_MAX_CHARS = 200
GIB = float(1 << 30)


@dataclass(frozen=True)
class Retention:
    """How long buckets are kept and how many keys each may hold."""

    hours_kept: int = defaults.GPU_TIME_HOURS_KEPT
    days_kept: int = defaults.GPU_TIME_DAYS_KEPT
    max_keys: int = defaults.GPU_TIME_MAX_KEYS

    def kept_s(self, period: str) -> int:
        """Seconds a bucket of `period` is kept after it ends."""
        return self.hours_kept * 3600 if period == HOUR else self.days_kept * 86400


@dataclass(frozen=True)
class Usage:
    """One attempt's use of a GPU."""

    queue: str
    name: str
    tenant: str
    started_s: float
    ended_s: float
    vram_bytes: int
    simulated: bool

    @property
    def gpu_seconds(self) -> float:
        """Wall seconds the attempt ran."""
        return max(self.ended_s - self.started_s, 0.0)

    @property
    def vram_gib_seconds(self) -> float:
        """VRAM held (GiB) times the seconds it ran."""
        return self.vram_bytes / GIB * self.gpu_seconds


def tenant_of(opts: Mapping[str, Any]) -> str:
    """The tenant a job's options name (`-` for none or a malformed one)."""
    value = opts.get(TENANT_OPTION)
    if not isinstance(value, str) or not value.strip():
        return NO_TENANT
    return value.strip()[:TENANT_MAX_CHARS]


def job_name_key(name: Any) -> str:
    """A job name as an accounting key (cut; `-` for none)."""
    return str(name)[:NAME_MAX_CHARS] if name else NO_TENANT


def bucket_stamp(period: str, start_s: int) -> str:
    """The stamp naming the bucket that starts at `start_s` (UTC)."""
    fmt = "%Y%m%d%H" if period == HOUR else "%Y%m%d"
    return time.strftime(fmt, time.gmtime(start_s))


def bucket_starts(period: str, since_s: float, until_s: float) -> list[int]:
    """Starts of the buckets of `period` overlapping [since, until], oldest first."""
    step = PERIOD_S[period]
    first = int(since_s // step) * step
    return list(range(first, int(until_s) + 1, step)) if until_s >= since_s else []


def split(period: str, start_s: float, end_s: float) -> list[tuple[int, float]]:
    """(bucket start, seconds in it) of the span [start, end)."""
    step = PERIOD_S[period]
    out = []
    for b in bucket_starts(period, start_s, end_s):
        seconds = min(end_s, b + step) - max(start_s, b)
        if seconds > 0 or (b <= end_s < b + step):
            out.append((b, max(seconds, 0.0)))
    return out


def script_args(
    usage: Usage, keys: BullpenKeys, retention: Retention, now_s: float
) -> tuple[list[str], list[Any]]:
    """The KEYS and ARGV of `gputime_add` for one attempt."""
    members = dict(zip(DIMENSIONS, (usage.queue, usage.name, usage.tenant)))
    run_s = usage.gpu_seconds
    vram_gib = usage.vram_bytes / GIB
    hashes: list[str] = []
    args: list[Any] = [retention.max_keys, OTHER]

    def add(
        key_of: Any, at: int, seconds: float, attempts: int, dims: dict[str, str]
    ) -> None:
        sim = seconds if usage.simulated else 0.0
        for dim, member in dims.items():
            hashes.append(key_of(dim))
            args.extend(
                [member, at, f"{seconds:.6f}", f"{seconds * vram_gib:.6f}"]
                + [attempts, f"{sim:.6f}"]
            )

    for period in (HOUR, DAY):
        kept = retention.kept_s(period)
        step = PERIOD_S[period]
        # A bucket already past its retention is skipped (it would expire at once).
        start = max(usage.started_s, now_s - kept)
        for b, seconds in split(period, start, usage.ended_s):
            stamp = bucket_stamp(period, b)
            last = b <= usage.ended_s < b + step

            def key_of(dim: str, p: str = period, s: str = stamp) -> str:
                return keys.gputime(p, s, dim)

            bucket = {**members, ALL: WHOLE}
            add(key_of, b + step + kept, seconds, 1 if last else 0, bucket)
    add(lambda dim: keys.gputime_total(dim), 0, run_s, 1, members)
    return hashes, args


class GpuTimeRecorder:
    """Adds attempts' usage to the buckets, on a worker's asyncio client."""

    def __init__(
        self, client: Any, keys: BullpenKeys, retention: Retention | None = None
    ) -> None:
        self.keys = keys
        self.retention = retention or Retention()
        self._add = LUA.script(client, "gputime_add")

    async def record(self, usage: Usage) -> None:
        """Count one attempt (one script call)."""
        hashes, args = script_args(usage, self.keys, self.retention, time.time())
        await self._add(keys=hashes, args=args)


@dataclass
class Row:
    """What one key (a queue, job name or tenant) used."""

    key: str
    gpu_seconds: float = 0.0
    vram_gib_seconds: float = 0.0
    attempts: int = 0
    simulated_seconds: float = 0.0

    def add(self, other: Row) -> None:
        """Add `other`'s figures to this row's."""
        self.gpu_seconds += other.gpu_seconds
        self.vram_gib_seconds += other.vram_gib_seconds
        self.attempts += other.attempts
        self.simulated_seconds += other.simulated_seconds


def _text(value: Any) -> str:
    """A reply as text (the pages' client decodes; another may not)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


_FIELD = {"s": "gpu_seconds", "v": "vram_gib_seconds", "sim": "simulated_seconds"}


def parse_hash(raw: Mapping[Any, Any]) -> dict[str, Row]:
    """The rows of one bucket hash; fields that do not parse are left out."""
    rows: dict[str, Row] = {}
    for field, value in raw.items():
        metric, sep, member = _text(field).partition("|")
        if not sep or metric not in METRICS:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        row = rows.setdefault(member, Row(member))
        if metric == "n":
            row.attempts = int(number)
        else:
            setattr(row, _FIELD[metric], number)
    return rows


def sum_rows(parts: Iterable[Mapping[str, Row]]) -> dict[str, Row]:
    """Rows of several buckets added key by key."""
    out: dict[str, Row] = {}
    for part in parts:
        for member, row in part.items():
            out.setdefault(member, Row(member)).add(row)
    return out


def read_buckets(
    client: Any, keys: BullpenKeys, period: str, starts: list[int], dim: str
) -> list[tuple[int, dict[str, Row]]]:
    """Each bucket's rows of one dimension (one pipelined round trip)."""
    pipe = client.pipeline(transaction=False)
    for b in starts:
        pipe.hgetall(keys.gputime(period, bucket_stamp(period, b), dim))
    return [(b, parse_hash(raw or {})) for b, raw in zip(starts, pipe.execute())]


def read_summed(
    client: Any, keys: BullpenKeys, period: str, starts: list[int], dim: str
) -> tuple[list[tuple[int, Row]], dict[str, Row]]:
    """Each bucket's total and each key's sum over the buckets, summed in
    Redis (one script call; the buckets share a hash tag)."""
    return read_summed_many(client, keys, [(period, starts, dim)])[0]


def read_summed_many(
    client: Any, keys: BullpenKeys, asks: list[tuple[str, list[int], str]]
) -> list[tuple[list[tuple[int, Row]], dict[str, Row]]]:
    """`read_summed` of several (period, starts, dim) in one round trip."""
    script = LUA.script(client, "gputime_sum")
    pipe = client.pipeline(transaction=False)
    for period, starts, dim in asks:
        hashes = [keys.gputime(period, bucket_stamp(period, b), dim) for b in starts]
        if hashes:
            script(keys=hashes, client=pipe)
    replies = iter(pipe.execute() if any(starts for _, starts, _ in asks) else [])

    def row(key: str, values: list[Any]) -> Row:
        s, v, n, sim = (float(x) for x in values)
        return Row(key, s, v, int(n), sim)

    out: list[tuple[list[tuple[int, Row]], dict[str, Row]]] = []
    for _, starts, _ in asks:
        if not starts:
            out.append(([], {}))
            continue
        buckets, flat = next(replies)
        totals = [(b, row("total", list(t))) for b, t in zip(starts, buckets)]
        sums = {}
        for i in range(0, len(flat), 5):
            key = _text(flat[i])
            sums[key] = row(key, flat[i + 1 : i + 5])
        out.append((totals, sums))
    return out


def read_totals(client: Any, keys: BullpenKeys) -> dict[str, dict[str, Row]]:
    """The running totals per dimension (for /metrics)."""
    pipe = client.pipeline(transaction=False)
    for dim in DIMENSIONS:
        pipe.hgetall(keys.gputime_total(dim))
    return {dim: parse_hash(raw or {}) for dim, raw in zip(DIMENSIONS, pipe.execute())}
