"""Events-stream entries as the browser messages of docs/dashboard-design.md.

- `{"type": "progress", "queue", "job", "progress", "id"}`
- `{"type": "event", "queue", "job", "event", "id", ...fields}`

Field values come from job data and errors, so they are untrusted: the job's
content in them (progress, return value, failed reason) goes through the
BULLPEN_REDACT hook as on every page, and long values are cut here (the
browser only ever sets them as text).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from dashboard.redaction import redact_fields
from queues import QueueEvent, codec

from . import defaults

#: Events after which a job sends no more progress.
FINAL_EVENTS = frozenset({"completed", "failed", "removed"})
_STREAM_ID = re.compile(r"^\d{1,20}-\d{1,20}$")
WORKERS_GROUP = "workers"


def queue_group(queue_key: str) -> str:
    """The channel-layer group of a queue's followers: `q.<sha1 of prefix:name>`."""
    return "q." + hashlib.sha1(queue_key.encode()).hexdigest()


def is_stream_id(value: Any) -> bool:
    """Whether value is a full stream id (`<ms>-<seq>`)."""
    return isinstance(value, str) and bool(_STREAM_ID.match(value))


def id_key(stream_id: str) -> tuple[int, int]:
    """A stream id as a tuple that orders as Redis orders ids."""
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


def _cut(value: Any, limit: int = defaults.FIELD_MAX_CHARS) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = codec.dumps(value)
    if len(text) <= limit:
        return value
    return text[:limit] + "…"


def from_event(queue_key: str, event: QueueEvent) -> dict[str, Any]:
    """The browser message for one parsed stream entry (redacted, cut)."""
    fields = redact_fields(event.fields)
    if event.event == "progress":
        return {
            "type": "progress",
            "queue": queue_key,
            "job": event.job_id,
            "progress": _cut(fields.get("data")),
            "id": event.id,
        }
    message: dict[str, Any] = {
        "type": "event",
        "queue": queue_key,
        "job": event.job_id,
        "event": event.event,
        "id": event.id,
    }
    for name, value in fields.items():
        if name not in message:
            message[name] = _cut(value)
    return message


def from_entry(queue_key: str, stream_id: str, raw: dict[str, str]) -> dict[str, Any]:
    """The browser message for one raw stream entry."""
    return from_event(queue_key, QueueEvent.parse(stream_id, raw))


def collapse_progress(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep only the latest progress of each job between its other events."""
    latest: dict[str | None, int] = {}
    keep = [True] * len(messages)
    for i, message in enumerate(messages):
        job = message.get("job")
        if message["type"] == "progress":
            if job in latest:
                keep[latest[job]] = False
            latest[job] = i
        else:
            latest.pop(job, None)
    return [m for m, k in zip(messages, keep) if k]
