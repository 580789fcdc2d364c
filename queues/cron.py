"""Schedule math of job schedulers: epoch ms from dates, and the next run of a
cron pattern as Node's `cron-parser` computes it (6 fields = seconds first;
no `tz` = the local zone of the process)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from .exceptions import InvalidJobOptions

DateLike = int | float | datetime | None


def to_ms(value: DateLike) -> int | None:
    """Epoch ms from ms or a datetime (naive = local time, as JS `new Date`)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)


def cron_next(
    pattern: str,
    after_ms: int,
    tz: str | None = None,
    start_date: int | None = None,
    end_date: int | None = None,
) -> int | None:
    """The first run strictly after `after_ms` (and not before start_date), or None
    past end_date, as Node's cron-parser gives it.

    Around DST changes cron-parser differs from croniter: a wall time skipped
    by spring-forward runs that much later (02:30 -> 03:30), and a pattern
    with a fixed hour does not run again in the repeated fall-back hour.
    Both are applied here (docs/bullmq-compat.md lists the checked cases).
    """
    try:
        zone = ZoneInfo(tz) if tz else datetime.now().astimezone().tzinfo
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidJobOptions(f"unknown time zone {tz!r}") from exc
    base = max(after_ms, start_date or 0)
    start = datetime.fromtimestamp(base / 1000, tz=zone)
    try:
        it = croniter(pattern, start, second_at_beginning=True)
    except (ValueError, KeyError) as exc:
        raise InvalidJobOptions(f"invalid cron pattern {pattern!r}: {exc}") from exc
    fixed_hour = pattern.split()[-4] != "*"
    for _ in range(64):
        run = it.get_next(datetime)
        run_ms = int(run.timestamp() * 1000)
        wall = run.replace(tzinfo=None)
        matches = (
            croniter(
                pattern, wall - timedelta(seconds=1), second_at_beginning=True
            ).get_next(datetime)
            == wall
        )
        if not matches:
            # croniter stepped into a DST gap: run at the skipped wall time,
            # placed after the change.
            shifted = croniter(
                pattern, start.replace(tzinfo=None), second_at_beginning=True
            ).get_next(datetime)
            run_ms = int(shifted.replace(tzinfo=zone).timestamp() * 1000)
            break
        first = int(wall.replace(tzinfo=zone, fold=0).timestamp() * 1000)
        if not (fixed_hour and first != run_ms and first <= base):
            break
    if end_date is not None and run_ms > end_date:
        return None
    return run_ms
