"""JSON Schemas of request and response bodies (OpenAPI 3.1 = JSON Schema
2020-12). The views validate request bodies with these very schemas, and the
OpenAPI document publishes them, so the two cannot drift apart. (Queue names
follow `queues.names.SAFE_QUEUE_NAME_PATTERN`.)"""

from __future__ import annotations

from typing import Any

from django import forms

from dashboard.shared.verbs import VERBS, Verb

from . import defaults
from .attempts_schema import ATTEMPT_HISTORY
from .groups_schema import GROUP_OPTION, GROUP_SCHEMAS
from .waiting_schema import WAITING_REASON

JOB_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:@/+-]{0,127}$"
#: Ids a client may choose (all-digit ids are refused: Redis assigns those).
CLIENT_JOB_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
#: Ids a job may have (repeatable jobs' ids hold colons).
JOB_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,200}$"
STREAM_ID_PATTERN = r"^[0-9]{1,20}-[0-9]{1,20}$"
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"

PRIORITY_MAX = 2**21 - 1
DELAY_MAX_MS = 365 * 24 * 3600 * 1000
BACKOFF_MAX_MS = 24 * 3600 * 1000
ATTEMPTS_MAX = 100
MS = "milliseconds"

_KEEP: dict[str, Any] = {
    "description": "true: remove at once; a number: keep the newest N; "
    "{age (seconds), count}: keep by age and count.",
    "anyOf": [
        {"type": "boolean"},
        {"type": "integer", "minimum": 0, "maximum": 1_000_000},
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "age": {"type": "integer", "minimum": 0, "maximum": 10**9},
                "count": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
            },
        },
    ],
}

JOB_OPTIONS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "job_id": {
            "type": "string",
            "pattern": CLIENT_JOB_ID_PATTERN,
            "description": "Your own id (not all digits); a taken id is a 409.",
        },
        "priority": {
            "type": "integer",
            "minimum": 0,
            "maximum": PRIORITY_MAX,
            "description": "0 = none; otherwise lower runs first.",
        },
        "delay": {
            "type": "integer",
            "minimum": 0,
            "maximum": DELAY_MAX_MS,
            "description": MS,
        },
        "attempts": {"type": "integer", "minimum": 1, "maximum": ATTEMPTS_MAX},
        "backoff": {
            "description": "Between attempts: a fixed delay in ms, or "
            "{type: fixed|exponential, delay (ms), jitter (0..1)}.",
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": BACKOFF_MAX_MS},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["type"],
                    "properties": {
                        "type": {"enum": ["fixed", "exponential"]},
                        "delay": {
                            "type": "integer",
                            "minimum": 0,
                            "maximum": BACKOFF_MAX_MS,
                        },
                        "jitter": {"type": "number", "minimum": 0, "maximum": 1},
                    },
                },
            ],
        },
        "lifo": {"type": "boolean"},
        "group": GROUP_OPTION,
        "remove_on_complete": _KEEP,
        "remove_on_fail": _KEEP,
        "webhook_url": {
            "type": "string",
            "maxLength": 2000,
            "pattern": "^https?://",
            "description": "Receives this job's events, signed (see the README).",
        },
        "webhook_events": {
            "type": "array",
            "items": {"enum": list(defaults.WEBHOOK_EVENTS)},
            "minItems": 1,
            "uniqueItems": True,
            "description": "Default: all of them.",
        },
    },
}

#: A queue's default job options (its settings in the admin): the request
#: options a queue may default.
DEFAULT_JOB_OPTIONS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        k: v
        for k, v in JOB_OPTIONS["properties"].items()
        if k not in ("job_id", "group", "webhook_url", "webhook_events")
    },
}

ENQUEUE_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": JOB_NAME_PATTERN},
        "data": {
            "description": "Any JSON value (default {}); checked against "
            "the queue's JSON Schema when it has one."
        },
        "options": {"$ref": "#/components/schemas/JobOptions"},
    },
}

_NULLABLE_INT = {"type": ["integer", "null"]}

ENQUEUED: dict[str, Any] = {
    "type": "object",
    "required": ["id", "queue", "name", "status_url", "events_url", "ticket"],
    "properties": {
        "id": {"type": "string"},
        "queue": {"type": "string"},
        "name": {"type": "string"},
        "status_url": {"type": "string"},
        "events_url": {"type": "string"},
        "ticket": {
            "type": "string",
            "description": "Read-only access to this job alone: pass ?ticket= to "
            "its status and events URLs (for browsers).",
        },
        "webhook": {"type": ["object", "null"]},
    },
}

JOB: dict[str, Any] = {
    "type": "object",
    "required": ["id", "queue", "name", "state", "attempts_made", "timestamps"],
    "properties": {
        "id": {"type": "string"},
        "queue": {"type": "string"},
        "name": {"type": "string"},
        "state": {
            "enum": [
                "waiting",
                "prioritized",
                "delayed",
                "active",
                "waiting-children",
                "completed",
                "failed",
                "paused",
                "unknown",
            ]
        },
        "data": {},
        "progress": {},
        "returnvalue": {},
        "failed_reason": {"type": ["string", "null"]},
        "attempts_made": {"type": "integer"},
        "attempts": {"type": "integer"},
        "priority": {"type": "integer"},
        "delay": {"type": "integer"},
        "group": {"type": ["string", "null"], "description": "null: no group"},
        "timestamps": {
            "type": "object",
            "properties": {
                "created": _NULLABLE_INT,
                "processed": _NULLABLE_INT,
                "finished": _NULLABLE_INT,
            },
        },
        "waiting_reason": {
            "oneOf": [
                {"$ref": "#/components/schemas/WaitingReason"},
                {"type": "null"},
            ],
            "description": "Why the job is not running yet; null unless it waits.",
        },
        "attempt_history": {"$ref": "#/components/schemas/AttemptHistory"},
    },
}

REMOVED: dict[str, Any] = {
    "type": "object",
    "required": ["id", "result"],
    "properties": {
        "id": {"type": "string"},
        "result": {"enum": ["removed", "cancel_requested"]},
        "previous_state": {"type": "string"},
    },
}

QUEUE: dict[str, Any] = {
    "type": "object",
    "required": ["queue", "paused", "counts"],
    "properties": {
        "queue": {"type": "string"},
        "paused": {"type": "boolean"},
        "counts": {
            "type": "object",
            "additionalProperties": {"type": "integer", "minimum": 0},
        },
    },
}

QUEUE_LIST: dict[str, Any] = {
    "type": "object",
    "required": ["queues"],
    "properties": {
        "queues": {"type": "array", "items": {"$ref": "#/components/schemas/Queue"}}
    },
}

DELIVERIES: dict[str, Any] = {
    "type": "object",
    "required": ["job_id", "deliveries"],
    "properties": {
        "job_id": {"type": "string"},
        "deliveries": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["delivery_id", "event", "url", "attempt", "outcome"],
                "properties": {
                    "delivery_id": {"type": "string"},
                    "event": {"type": "string"},
                    "url": {"type": "string"},
                    "attempt": {"type": "integer"},
                    "outcome": {"enum": ["delivered", "retrying", "failed", "refused"]},
                    "status_code": {"type": ["integer", "null"]},
                    "error": {"type": ["string", "null"]},
                    "at_ms": {"type": "integer"},
                    "duration_ms": {"type": "integer"},
                },
            },
        },
    },
}

SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One Server-Sent Event: `event` is `state` (the job now) or an "
    "event of the job; `data` is a JSON object with job_id and the event's fields; "
    "`id` is the stream id to resume from.",
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string", "contentMediaType": "application/json"},
        "id": {"type": "string", "pattern": STREAM_ID_PATTERN},
        "retry": {"type": "integer"},
    },
}

#: Every error code the API answers with, by HTTP status (stable: clients may
#: branch on them).
ERROR_CODES: dict[int, tuple[str, ...]] = {
    400: (
        "malformed_json",
        "invalid_body",
        "missing_field",
        "unknown_field",
        "unknown_option",
        "invalid_option",
        "invalid_queue_name",
        "invalid_job_name",
        "invalid_job_id",
        "invalid_webhook_url",
        "invalid_idempotency_key",
        "invalid_last_event_id",
        "invalid_group",
        "group_not_allowed",
    ),
    401: ("missing_token", "invalid_token", "revoked_token", "invalid_ticket"),
    403: ("queue_not_allowed", "insufficient_scope"),
    404: ("not_found", "job_not_found", "group_not_found"),
    405: ("method_not_allowed",),
    409: (
        "job_id_taken",
        "idempotency_in_progress",
        "job_has_running_child",
        "wrong_job_state",
        "action_refused",
    ),
    413: ("payload_too_large",),
    415: ("unsupported_media_type",),
    422: ("schema_validation_failed", "idempotency_key_reused", "webhook_url_refused"),
    429: ("rate_limited",),
    500: ("internal_error",),
    503: ("redis_unavailable",),
}

ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {
                    "enum": sorted({c for cs in ERROR_CODES.values() for c in cs})
                },
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
        }
    },
}

JOB_ACTED: dict[str, Any] = {
    "type": "object",
    "required": ["id", "action", "previous_state", "message"],
    "properties": {
        "id": {"type": "string"},
        "action": {"enum": sorted(VERBS)},
        "previous_state": {"type": "string"},
        "message": {"type": "string"},
        "new_id": {"type": "string", "description": "The job a Duplicate added."},
    },
}


def verb_id(verb: Verb) -> str:
    """The verb's label in camelCase (operation ids, schema names)."""
    first, *rest = verb.label.split()
    return first.lower() + "".join(w.capitalize() for w in rest)


def verb_request_name(verb: Verb) -> str:
    """The name of a verb's request schema."""
    word = verb_id(verb)
    return word[0].upper() + word[1:] + "Request"


def verb_request(verb: Verb) -> dict[str, Any]:
    """The JSON Schema of a verb's parameter, made from its form's fields
    (whole numbers with their bounds, booleans), so the API and the pages
    accept the same values."""
    assert verb.params is not None
    props: dict[str, Any] = {}
    for name, f in verb.params.base_fields.items():
        if isinstance(f, forms.BooleanField):
            props[name] = {"type": "boolean"}
            continue
        assert isinstance(f, forms.IntegerField), f"{verb.name}.{name}"
        props[name] = {"type": "integer", "minimum": f.min_value}
        if f.max_value is not None:
            props[name]["maximum"] = f.max_value
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [n for n, f in verb.params.base_fields.items() if f.required],
        "properties": props,
    }


COMPONENTS: dict[str, dict[str, Any]] = {
    "EnqueueRequest": ENQUEUE_REQUEST,
    "JobOptions": JOB_OPTIONS,
    "Enqueued": ENQUEUED,
    "Job": JOB,
    "WaitingReason": WAITING_REASON,
    "AttemptHistory": ATTEMPT_HISTORY,
    "Removed": REMOVED,
    "JobActed": JOB_ACTED,
    **{verb_request_name(v): verb_request(v) for v in VERBS.values() if v.params},
    "Queue": QUEUE,
    "QueueList": QUEUE_LIST,
    "Deliveries": DELIVERIES,
    **GROUP_SCHEMAS,
    "SseEvent": SSE_EVENT,
    "Error": ERROR,
}
