"""Template filters for times, durations and sizes (all return plain text), and
the GPU summary's unit words (`unit`, HTML)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from dashboard.shared.discovery import QueueRef

register = template.Library()


def _moment(value: Any) -> datetime | None:
    """Epoch milliseconds as an aware UTC datetime (None when unset or bad)."""
    if not value:
        return None
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


@register.filter
def ms_time(value: Any) -> str:
    """Epoch milliseconds as `YYYY-MM-DD HH:MM:SS` UTC ("" when unset)."""
    moment = _moment(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else ""


@register.filter
def ms_short(value: Any) -> str:
    """Epoch milliseconds as `HH:MM:SS` (today, UTC) or `MM-DD HH:MM`."""
    moment = _moment(value)
    if moment is None:
        return ""
    if moment.date() == datetime.now(tz=UTC).date():
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%m-%d %H:%M")


@register.filter
def duration(value: Any) -> str:
    """Milliseconds as a short duration: 850 ms, 4.2 s, 3 m 05 s, 2 h 07 m, 3 d 4 h."""
    if value is None or value == "":
        return ""
    try:
        ms = int(value)
    except (TypeError, ValueError):
        return ""
    if ms < 0:
        return "-" + duration(-ms)
    if ms < 1000:
        return f"{ms} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(int(s), 60)
    if m < 60:
        return f"{m} m {s:02d} s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m:02d} m"
    d, h = divmod(h, 24)
    return f"{d} d {h} h"


@register.filter
def size(value: Any) -> str:
    """Bytes in binary units: 512 B, 1.5 KiB, 10.0 GiB."""
    if value is None or value == "":
        return ""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return ""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


@register.filter
def gpu_hours(value: Any) -> str:
    """Seconds as hours: 1,234, 12.35, 0.97, < 0.01 (above none), 0.00."""
    try:
        hours = float(value) / 3600
    except (TypeError, ValueError):
        return ""
    if abs(hours) >= 100:
        return f"{hours:,.0f}"
    return "< 0.01" if 0 < hours < 0.005 else f"{hours:.2f}"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """mapping[key], or "" (for dicts keyed by state names with dashes)."""
    try:
        return mapping[key]
    except (KeyError, IndexError, TypeError):
        return ""


@register.filter
def queue_ref(queue: Any) -> Any:
    """The QueueRef of a Queue object (for `.odd` and `.label` in templates)."""
    return QueueRef(queue.prefix, queue.name)


@register.simple_tag
def unit(field: str, count: Any, one: str, many: str) -> SafeString:
    """The unit word after a count of the GPU summary (`data-summary=field`):
    `one` for 1, else `many`; both ride along for gpus.js, which picks again
    when a live update changes the count."""
    word = one if str(count) == "1" else many
    return format_html(
        '<span data-unit="{}" data-one="{}" data-many="{}">{}</span>',
        field,
        one,
        many,
        word,
    )
