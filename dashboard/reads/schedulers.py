"""What the job schedulers page reads: a page of a queue's schedulers (next run
from the `repeat` ZSET score, the last job each produced) and the schedulers
paused from the dashboard, whose definitions the audit log keeps.

Template data passes through the redaction hook wherever it is shown (rows, the
edit form, a pause's audit row); when redaction hides part of a paused
scheduler's template, its full definition is kept in Bullpen's namespace
(`{namespace}:paused-scheduler:{prefix}:{queue}:{id}`, a string of JSON
{token, definition}; the audit row names the token as `kept`) for Restore,
which deletes it.

BullMQ names a scheduler's iterations `repeat:<id>:<millis>`: the current
one is the delayed job at the next run, the last one the iteration before it
(`every` ms earlier, or the cron pattern's previous slot). Reading it costs
one request per row, so a page is bounded by the page size.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from queues import ops
from queues.scheduler import JobScheduler

from ..models import AuditEntry
from ..redaction import redact, redaction_on
from ..scheduler_forms import initial_of
from ..shared import conf
from ..shared import redis as pages_redis
from .discovery import QueueRef

#: Actions on a scheduler that say whether it is paused (the newest wins).
PAUSE = "scheduler.pause"
STATE_ACTIONS = (
    PAUSE,
    "scheduler.restore",
    "scheduler.remove",
    "scheduler.create",
    "scheduler.edit",
)
#: What a pause's audit detail starts with; the definition's JSON follows.
PAUSED_PREFIX = "paused; definition: "
#: Paused schedulers listed at most (the newest).
PAUSED_SHOWN = 20
#: Characters of template data shown in a row.
DATA_CHARS = 160
#: The key of a pause's definition naming its full copy (redaction hid part).
KEPT = "kept"


class KeptCopyMissing(LookupError):
    """Raised when a paused definition's full copy is no longer in Redis."""


@dataclass
class SchedulerRow:
    """One scheduler as the page shows it."""

    scheduler: JobScheduler
    last_job_id: str | None = None
    last_job_state: str | None = None
    next_job_id: str | None = None
    next_in_ms: int | None = None
    data_text: str = ""
    opts_text: str = ""
    initial: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The scheduler's id (its `repeat` member)."""
        return self.scheduler.key


@dataclass
class PausedScheduler:
    """A scheduler removed by "pause", with what re-creates it."""

    scheduler_id: str
    entry: AuditEntry
    definition: dict[str, Any]


def previous_run(s: JobScheduler) -> int | None:
    """The run before the next one: the slot of the last iteration."""
    if s.next is None:
        return None
    if s.every:
        return s.next - s.every
    if not s.pattern:
        return None
    try:
        zone = ZoneInfo(s.tz) if s.tz else datetime.now().astimezone().tzinfo
        at = datetime.fromtimestamp(s.next / 1000, tz=zone)
        prev = croniter(s.pattern, at, second_at_beginning=True).get_prev(datetime)
    except (ZoneInfoNotFoundError, ValueError, KeyError):
        return None
    return int(prev.timestamp() * 1000)


def _text(value: Any, cap: int) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= cap else text[:cap] + "…"


def schedulers_page(
    ref: QueueRef, page_no: int, size: int
) -> tuple[list[SchedulerRow], int]:
    """One page of schedulers, soonest next run first, and how many there are."""
    q = pages_redis.queue(ref.prefix, ref.name)
    total = q.get_job_schedulers_count()
    start = (page_no - 1) * size
    found = q.get_job_schedulers(start, start + size - 1, asc=True)
    rows = []
    now = ops.now_ms()
    # The last run's job, where it still exists: one pipelined EXISTS for the
    # page, then a state read only for those found (a state read of a missing
    # id searches every list, the whole wait list included).
    last_ids = {
        s.key: f"repeat:{s.key}:{prev}"
        for s in found
        if (prev := previous_run(s)) is not None
    }
    pipe = pages_redis.client().pipeline(transaction=False)
    for job_id in last_ids.values():
        pipe.exists(q.keys.job(job_id))
    present = {i for i, n in zip(last_ids.values(), pipe.execute()) if n}
    for s in found:
        shown = redact(s.template.get("data", {}))
        row = SchedulerRow(
            scheduler=s,
            data_text=_text(shown, DATA_CHARS),
            opts_text=_text(s.template.get("opts") or {}, DATA_CHARS),
            # The edit form shows what a viewer sees; a save that leaves a
            # redacted field alone keeps its stored value (keep_unchanged).
            initial={
                **initial_of(s),
                "job_data": json.dumps(shown, ensure_ascii=False),
            },
        )
        if s.next is not None:
            row.next_job_id = f"repeat:{s.key}:{s.next}"
            row.next_in_ms = s.next - now
        last = last_ids.get(s.key)
        if last in present:
            state = q.get_job_state(last).value
            if state != "unknown":
                row.last_job_id, row.last_job_state = last, state
        rows.append(row)
    return rows, total


def paused(ref: QueueRef) -> list[PausedScheduler]:
    """Schedulers of the queue whose newest audited change is a pause and
    that do not exist again (re-created by other means)."""
    entries = AuditEntry.objects.filter(
        target__startswith=ref.key + ":", action__in=STATE_ACTIONS, outcome="ok"
    ).order_by("-id")[:200]
    seen: set[str] = set()
    out: list[PausedScheduler] = []
    q = pages_redis.queue(ref.prefix, ref.name)
    for entry in entries:
        sid = entry.target[len(ref.key) + 1 :]
        if sid in seen or ":" in sid:
            continue
        seen.add(sid)
        if entry.action != PAUSE or not entry.detail.startswith(PAUSED_PREFIX):
            continue
        try:
            definition = json.loads(entry.detail[len(PAUSED_PREFIX) :])
        except json.JSONDecodeError:
            continue
        if q.get_job_scheduler(sid) is None:
            out.append(PausedScheduler(sid, entry, definition))
        if len(out) >= PAUSED_SHOWN:
            break
    return out


def paused_definition(ref: QueueRef, scheduler_id: str) -> JobScheduler | None:
    """The definition the newest pause of this scheduler kept, or None when
    its newest audited change is not a pause."""
    entry = (
        AuditEntry.objects.filter(
            target=f"{ref.key}:{scheduler_id}", action__in=STATE_ACTIONS, outcome="ok"
        )
        .order_by("-id")
        .first()
    )
    if entry is None or entry.action != PAUSE:
        return None
    if not entry.detail.startswith(PAUSED_PREFIX):
        return None
    try:
        d = json.loads(entry.detail[len(PAUSED_PREFIX) :])
    except json.JSONDecodeError:
        return None
    if isinstance(d, dict) and d.get(KEPT):
        raw = pages_redis.client().get(_kept_key(ref, scheduler_id))
        kept = json.loads(raw) if raw else {}
        if kept.get("token") != d[KEPT]:
            raise KeptCopyMissing(
                f"{scheduler_id}'s template was redacted in the audit log and its "
                "full copy is gone from Redis: re-create it"
            )
        d = kept["definition"]
    return from_dict(d)


def _kept_key(ref: QueueRef, scheduler_id: str) -> str:
    return f"{conf.get().namespace}:paused-scheduler:{ref.key}:{scheduler_id}"


def redacted_definition(definition: dict[str, Any]) -> dict[str, Any]:
    """A scheduler's `to_dict` form with its template data redacted."""
    template = definition.get("template")
    if not isinstance(template, dict) or "data" not in template:
        return definition
    return {**definition, "template": {**template, "data": redact(template["data"])}}


def pause_definition(ref: QueueRef, s: JobScheduler) -> dict[str, Any]:
    """What a pause's audit row keeps: the definition, redacted; when that
    hides anything, the full one is kept in Redis and the row names it."""
    full = s.to_dict()
    shown = redacted_definition(full)
    if not redaction_on() or shown == full:
        return full
    token = secrets.token_hex(8)
    kept = json.dumps({"token": token, "definition": full}, ensure_ascii=False)
    pages_redis.client().set(_kept_key(ref, s.key), kept)
    return {**shown, KEPT: token}


def forget_kept(ref: QueueRef, scheduler_id: str) -> None:
    """Delete the full copy a pause kept (once it is restored)."""
    pages_redis.client().delete(_kept_key(ref, scheduler_id))


def shown_detail(detail: str) -> str:
    """An audit row's detail as a page shows it: a pause's definition with
    its template data redacted (rows written before pauses were redacted)."""
    if not detail.startswith(PAUSED_PREFIX) or not redaction_on():
        return detail
    try:
        d = json.loads(detail[len(PAUSED_PREFIX) :])
    except json.JSONDecodeError:
        return PAUSED_PREFIX + "(not shown: not JSON)"
    if not isinstance(d, dict):
        return PAUSED_PREFIX + "(not shown)"
    return PAUSED_PREFIX + json.dumps(redacted_definition(d), ensure_ascii=False)


def from_dict(d: dict[str, Any]) -> JobScheduler:
    """A JobScheduler from its `to_dict` form (what a pause keeps)."""
    return JobScheduler(
        key=str(d["key"]),
        name=str(d.get("name") or d["key"]),
        limit=d.get("limit"),
        start_date=d.get("startDate"),
        end_date=d.get("endDate"),
        tz=d.get("tz"),
        pattern=d.get("pattern"),
        every=d.get("every"),
        offset=d.get("offset"),
        template=dict(d.get("template") or {}),
    )
