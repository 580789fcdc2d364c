"""Job schedulers as BullMQ 6 stores them (docs/protocol.md §1.2, 1.4): operations to
upsert, read and remove them, and to produce the next iteration when a worker
takes the current one; the queue API over them is `queues.scheduler_methods`.

A scheduler is the `repeat` ZSET entry (score = millis of its current
iteration) plus the `repeat:{id}` hash; each iteration is a job
`repeat:{id}:{millis}` with `rjk = id`. `every` schedulers compute their
next run in Lua; cron patterns are evaluated in `queues.cron`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import codec
from .cron import DateLike, cron_next, to_ms
from .exceptions import InvalidJobOptions, raise_for_code
from .keys import QueueKeys
from .ops import Cmd, Eval, Op
from .options import build_opts, decode_opts, merge_job_options, refuse_stamped

#: The largest number a scheduler field may hold: Node BullMQ reads them as
#: JavaScript numbers and the scripts as Lua doubles, both exact up to 2**53 - 1
#: (Number.MAX_SAFE_INTEGER); redis-py refuses more than 64 bits outright.
LARGEST_NUMBER = 2**53 - 1

#: Unicode categories refused in a scheduler id: controls (newline, CR, tab,
#: NUL...), line and paragraph separators.
_CONTROL = frozenset({"Cc", "Zl", "Zp"})


def check_scheduler_id(scheduler_id: object) -> str:
    """A scheduler id as BullMQ keys can hold it, else ValueError saying why."""
    if not isinstance(scheduler_id, str) or not scheduler_id:
        raise ValueError("a job scheduler id must be a non-empty string")
    if ":" in scheduler_id:
        # Its hash `repeat:<id>` and iteration ids `repeat:<id>:<millis>` would
        # then collide with other schedulers' and custom jobs' keys.
        raise ValueError("a job scheduler id cannot contain ':'")
    if any(unicodedata.category(ch) in _CONTROL for ch in scheduler_id):
        # A line break in an id breaks logs, CSV exports and URLs alike.
        raise ValueError(
            "a job scheduler id cannot contain control characters or line breaks"
        )
    return scheduler_id


def _check_numbers(**numbers: int | None) -> None:
    for name, value in numbers.items():
        if value is not None and not -LARGEST_NUMBER <= value <= LARGEST_NUMBER:
            raise ValueError(
                f"{name} must be between -{LARGEST_NUMBER} and {LARGEST_NUMBER}"
            )


@dataclass(frozen=True)
class JobScheduler:
    """One scheduler as `Queue.getJobSchedulers()` reports it."""

    key: str
    name: str
    next: int | None = None
    iteration_count: int | None = None
    limit: int | None = None
    start_date: int | None = None
    end_date: int | None = None
    tz: str | None = None
    pattern: str | None = None
    every: int | None = None
    offset: int | None = None
    template: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_hash(cls, key: str, h: dict[str, str], next_ms: Any) -> JobScheduler:
        """Build from the `repeat:{id}` hash and its `repeat` score."""
        template: dict[str, Any] = {}
        if h.get("data"):
            template["data"] = codec.json_or_text(h["data"])
        if h.get("opts"):
            opts = codec.json_or_text(h["opts"])
            template["opts"] = decode_opts(opts) if isinstance(opts, dict) else opts
        return cls(
            key=key,
            name=h.get("name", key),
            next=codec.to_int(None if next_ms is None else str(next_ms)),
            iteration_count=codec.to_int(h.get("ic")),
            limit=codec.to_int(h.get("limit")),
            start_date=codec.to_int(h.get("startDate")),
            end_date=codec.to_int(h.get("endDate")),
            tz=h.get("tz") or None,
            pattern=h.get("pattern") or None,
            every=codec.to_int(h.get("every")),
            offset=codec.to_int(h.get("offset")),
            template=template,
        )

    def to_dict(self) -> dict[str, Any]:
        """Node's field names (`iterationCount`, `startDate`...), unset ones out."""
        out: dict[str, Any] = {"key": self.key, "name": self.name, "next": self.next}
        for attr, name in (
            ("iteration_count", "iterationCount"),
            ("limit", "limit"),
            ("start_date", "startDate"),
            ("end_date", "endDate"),
            ("tz", "tz"),
            ("pattern", "pattern"),
            ("every", "every"),
            ("offset", "offset"),
        ):
            value = getattr(self, attr)
            if value is not None:
                out[name] = value
        if self.template:
            out["template"] = self.template
        return out


def _script_keys(keys: QueueKeys) -> tuple[str, ...]:
    return (keys.repeat, keys.meta, keys.id, keys.events)


def _template_opts(opts: dict[str, Any] | None) -> dict[str, Any]:
    """A template's `add` options as stored opts, without add-time defaults."""
    given = dict(opts or {})
    refuse_stamped(given)
    for banned in ("job_id", "delay", "deduplication"):
        if given.get(banned) is not None:
            raise InvalidJobOptions(f"a scheduler template cannot set {banned}")
    stored = build_opts(**given)
    stored.pop("delay", None)
    if not stored.get("attempts"):
        stored.pop("attempts", None)
    return stored


def upsert(
    keys: QueueKeys,
    scheduler_id: str,
    now: int,
    *,
    every_ms: int | None = None,
    cron: str | None = None,
    tz: str | None = None,
    limit: int | None = None,
    start_date: DateLike = None,
    end_date: DateLike = None,
    offset_ms: int | None = None,
    template: dict[str, Any] | None = None,
    queue_defaults: Mapping[str, Any] | None = None,
) -> Op[tuple[str, int] | None]:
    """Create or replace a scheduler and add its next iteration; returns
    (iteration id, delay ms), or None when `limit` allows no run. The
    template's opts lie over `queue_defaults` (the queue's default job
    options but delay and timestamp, which the scheduler sets), as in BullMQ."""
    check_scheduler_id(scheduler_id)
    if (every_ms is None) == (cron is None):
        raise ValueError("give exactly one of every_ms and cron")
    if every_ms is not None and (not isinstance(every_ms, int) or every_ms < 1):
        raise ValueError("every_ms must be an integer >= 1")
    start_ms, end_ms = to_ms(start_date), to_ms(end_date)
    _check_numbers(
        every_ms=every_ms,
        limit=limit,
        start_date=start_ms,
        end_date=end_ms,
        offset_ms=offset_ms,
    )
    if end_ms is not None and end_ms < now:
        raise ValueError("end_date must be in the future")
    template = dict(template or {})
    unknown = set(template) - {"name", "data", "opts"}
    if unknown:
        raise ValueError(f"template has unknown keys {sorted(unknown)}")
    name = template.get("name") or scheduler_id
    inherited = {
        k: v
        for k, v in (queue_defaults or {}).items()
        if k not in ("delay", "timestamp")
    }
    template_opts = _template_opts(
        merge_job_options(inherited, template.get("opts") or {})
    )
    data_json = codec.dumps(
        template.get("data") if template.get("data") is not None else {}
    )
    if limit is not None and limit < 1:
        return None
    spec: dict[str, Any] = {"name": name}
    repeat: dict[str, Any] = {}
    if every_ms is not None:
        spec["every"] = repeat["every"] = every_ms
        if offset_ms:
            spec["offset"] = repeat["offset"] = offset_ms
    else:
        assert cron is not None
        spec["pattern"] = repeat["pattern"] = cron
        next_ms = cron_next(cron, now, tz, start_ms, end_ms)
        if next_ms is None:
            return None
        spec["nextMillis"] = next_ms
    for key, value in (
        ("tz", tz),
        ("limit", limit),
        ("startDate", start_ms),
        ("endDate", end_ms),
    ):
        if value is not None:
            spec[key] = repeat[key] = value
    repeat["count"] = 1
    opts = {
        **template_opts,
        "repeat": repeat,
        "timestamp": now,
        "repeatJobKey": scheduler_id,
    }
    if "nextMillis" in spec:
        opts["prevMillis"] = spec["nextMillis"]
    spec["templateOpts"] = codec.dumps(template_opts)
    spec["opts"] = codec.dumps(opts)
    reply = yield Eval(
        "add_job_scheduler",
        _script_keys(keys),
        (keys.base, now, scheduler_id, codec.dumps(spec), data_json),
    )
    raise_for_code(reply, scheduler_id)
    return str(reply[0]), int(reply[1])


def next_iteration(
    keys: QueueKeys, job_id: str, scheduler_id: str, raw_opts: str | None, now: int
) -> Op[str | None]:
    """Add the iteration after `job_id`, as Node's worker does when it takes a
    scheduler's job; returns the new id, or None (limit or end reached, or
    the job is not the scheduler's current iteration)."""
    try:
        stored = codec.loads(raw_opts or "{}")
    except codec.JSONDecodeError:
        stored = {}
    if not isinstance(stored, dict):
        stored = {}
    definition = yield Cmd(("HGETALL", keys.scheduler(scheduler_id)))
    if not definition:
        return None
    repeat = dict(stored.get("repeat") or {})
    every = codec.to_int(definition.get("every")) or repeat.get("every")
    pattern = definition.get("pattern") or repeat.get("pattern")
    limit = codec.to_int(definition.get("limit")) or repeat.get("limit")
    end_date = codec.to_int(definition.get("endDate")) or repeat.get("endDate")
    count = repeat.get("count")
    iteration = int(count) + 1 if count else 1
    if limit and iteration > int(limit):
        return None
    if end_date and now > int(end_date):
        return None
    next_ms: int | None = None
    opts = dict(stored)
    if every:
        opts.pop("prevMillis", None)
        if not repeat.get("offset"):
            repeat.pop("offset", None)
    elif pattern:
        base = max(now, int(stored.get("prevMillis") or 0))
        next_ms = cron_next(
            pattern,
            base,
            definition.get("tz") or repeat.get("tz"),
            codec.to_int(definition.get("startDate")),
            end_date,
        )
        if next_ms is None:
            return None
        opts["prevMillis"] = next_ms = max(next_ms, base)
    else:
        return None
    repeat["count"] = iteration
    opts.update(repeat=repeat, timestamp=now, repeatJobKey=scheduler_id)
    new_id = yield Eval(
        "update_job_scheduler",
        _script_keys(keys),
        (
            keys.base,
            now,
            scheduler_id,
            job_id,
            "" if next_ms is None else next_ms,
            codec.dumps(opts),
        ),
    )
    return str(new_id) if new_id and new_id != 0 else None


def remove(keys: QueueKeys, scheduler_id: str) -> Op[bool]:
    """Delete a scheduler and its delayed next iteration; False when unknown."""
    code = yield Eval(
        "remove_job_scheduler",
        (keys.repeat, keys.delayed, keys.events),
        (keys.base, scheduler_id),
    )
    return bool(code == 0)


def get_one(keys: QueueKeys, scheduler_id: str) -> Op[JobScheduler | None]:
    """One scheduler, or None."""
    score, h = yield [
        Cmd(("ZSCORE", keys.repeat, scheduler_id)),
        Cmd(("HGETALL", keys.scheduler(scheduler_id))),
    ]
    if score is None or not h:
        return None
    return JobScheduler.from_hash(scheduler_id, h, int(float(score)))


def get_many(
    keys: QueueKeys, start: int, end: int, asc: bool
) -> Op[list[JobScheduler]]:
    """A page of schedulers ordered by next run (newest first unless asc)."""
    command = "ZRANGE" if asc else "ZREVRANGE"
    reply = yield Cmd((command, keys.repeat, start, end, "WITHSCORES"))
    # redis-py pairs the members with their scores itself (RESP2 and 3).
    if reply and not isinstance(reply[0], (list, tuple)):
        reply = list(zip(reply[::2], reply[1::2], strict=True))
    pairs = [(str(member), score) for member, score in reply]
    if not pairs:
        return []
    hashes = yield [Cmd(("HGETALL", keys.scheduler(sid))) for sid, _ in pairs]
    return [
        JobScheduler.from_hash(sid, h, int(float(score)))
        for (sid, score), h in zip(pairs, hashes, strict=True)
        if h
    ]


def count(keys: QueueKeys) -> Op[int]:
    """The number of schedulers (members of the `repeat` ZSET)."""
    n = yield Cmd(("ZCARD", keys.repeat))
    return int(n)
