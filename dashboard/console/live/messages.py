"""Events-stream entries as the browser messages of docs/dashboard-design.md.

- `{"type": "progress", "queue", "job", "progress", "id"}`
- `{"type": "event", "queue", "job", "event", "id", ...fields}`

Field values come from job data and errors, so they are untrusted: the job's
content in them (progress, return value, failed reason) goes through the
redaction hook as on every page, and long values are cut here (the
browser only ever sets them as text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dashboard.shared.redaction import redact_fields
from queues import QueueEvent, codec
from queues.events import EventName, parse_entry

from . import defaults


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
    if event.event == EventName.PROGRESS:
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


def from_entry(queue_key: str, stream_id: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The browser message for one raw stream entry."""
    return from_event(queue_key, parse_entry(stream_id, raw))


def superseded(messages: Sequence[dict[str, Any]]) -> list[bool]:
    """Which messages are a progress that a later progress of the same job
    replaces with no other event of that job between (latest wins)."""
    latest: dict[tuple[Any, Any], int] = {}
    out = [False] * len(messages)
    for i, message in enumerate(messages):
        key = (message.get("queue"), message.get("job"))
        if message["type"] == "progress":
            if key in latest:
                out[latest[key]] = True
            latest[key] = i
        else:
            latest.pop(key, None)
    return out


def collapse_progress(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep only the latest progress of each job between its other events."""
    return [m for m, gone in zip(messages, superseded(messages)) if not gone]
