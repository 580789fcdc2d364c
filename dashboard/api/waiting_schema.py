"""The JSON Schema of a job's `waiting_reason` (why it is not running yet),
one object per code of gpu_workers/waiting/reasons.py, in the OpenAPI
document as `WaitingReason`."""

from __future__ import annotations

from typing import Any

from gpu_workers.waiting import CODES as WAITING_CODES

_NULLABLE_INT = {"type": ["integer", "null"]}

#: One reason (gpu_workers/waiting/reasons.py): its stable code, a sentence,
#: and the numbers of that code (times in epoch ms, sizes in bytes).
_REASON_PROPERTIES: dict[str, Any] = {
    "code": {"enum": list(WAITING_CODES)},
    "message": {"type": "string"},
    "until_ms": _NULLABLE_INT,
    "in_ms": {"type": "integer"},
    "ahead": _NULLABLE_INT,
    "ahead_at_least": {"type": "integer"},
    "ahead_at_most": {"type": "integer"},
    "ahead_same_priority": {"type": "integer"},
    "priority": {"type": "integer"},
    "eta_ms": {"type": "integer"},
    "eta_at_least_ms": {"type": "integer"},
    "eta_at_most_ms": {"type": "integer"},
    "finished_per_min": {"type": ["number", "null"]},
    "active": {"type": ["integer", "null"]},
    "concurrency": {"type": "integer"},
    "started_in_window": _NULLABLE_INT,
    "max": _NULLABLE_INT,
    "pending": _NULLABLE_INT,
    "total": _NULLABLE_INT,
    "failed": _NULLABLE_INT,
    "workers": {"type": "integer"},
    "need_bytes": {"type": "integer"},
    "most_uncommitted_bytes": {"type": "integer"},
    "largest_budget_bytes": {"type": "integer"},
    "would_fit": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "host": {"type": "string"},
                "gpu": {"type": "string"},
                "uuid": {"type": "string"},
                "budget_bytes": {"type": "integer"},
                "queues": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
    "attempt": {"type": "integer"},
    "attempts": {"type": "integer"},
    "last_error": {"type": ["string", "null"]},
    "error": {"type": "string"},
    "model": {"type": "string"},
    "gpu": {"type": "string"},
    "host": {"type": "string"},
    "since_ms": _NULLABLE_INT,
    "expected_s": {"type": ["number", "null"]},
    "group": {"type": "string"},
    "groups_ahead": _NULLABLE_INT,
    "ahead_in_group": _NULLABLE_INT,
    "hold": {"type": "string"},
    "used_s": {"type": ["number", "null"]},
    "budget_s": {"type": ["number", "null"]},
    "day": {"type": ["string", "null"]},
    "duration_ms": _NULLABLE_INT,
}

WAITING_REASON: dict[str, Any] = {
    "type": "object",
    "description": "Why a waiting, prioritized, delayed or waiting-children job "
    "is not running yet (or an active one whose GPU worker still loads its "
    "model: loading_model): the primary reason, and in `also` the others that hold "
    "too. Codes: " + ", ".join(WAITING_CODES) + " (docs/http-api.md).",
    "required": ["code", "message", "also"],
    "properties": {
        **_REASON_PROPERTIES,
        "also": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["code", "message"],
                "properties": _REASON_PROPERTIES,
            },
        },
        "pending_children": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["prefix", "queue", "id"],
                "properties": {
                    "prefix": {"type": "string"},
                    "queue": {"type": "string"},
                    "id": {"type": "string"},
                },
            },
        },
    },
}
