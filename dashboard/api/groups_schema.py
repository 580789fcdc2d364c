"""JSON Schemas of the groups operations (docs/groups.md): the enqueue
option, a group as the API shows it, a page of groups, and the bodies that
change a group's settings or every group's defaults."""

from __future__ import annotations

from typing import Any

from gpu_workers.quota import BUDGET_MAX_S

from .grouping import GROUP_ID_PATTERN

WEIGHT_MAX = 1_000
CONCURRENCY_MAX = 1_000_000
RATE_MAX_MAX = 1_000_000
RATE_DURATION_MAX_MS = 24 * 3600 * 1000

GROUP_OPTION: dict[str, Any] = {
    "type": "string",
    "pattern": GROUP_ID_PATTERN,
    "description": "Tokens with may_set_group only: the job's group is "
    '"<token\'s group>/<group>" (a sub-customer).',
}

_INT_OR_NULL = {"type": ["integer", "null"]}


def _setting(minimum: int, maximum: int, doc: str) -> dict[str, Any]:
    return {
        "type": ["integer", "null"],
        "minimum": minimum,
        "maximum": maximum,
        "description": doc + "; null clears it.",
    }


#: The settings a request may change (each optional; null clears).
_SETTINGS: dict[str, Any] = {
    "weight": _setting(1, WEIGHT_MAX, "Turns in a row (default 1)"),
    "concurrency": _setting(
        0, CONCURRENCY_MAX, "Most active jobs at once, all workers (0: no limit)"
    ),
    "rate_max": _setting(1, RATE_MAX_MAX, "Most jobs started per window"),
    "rate_duration_ms": _setting(1, RATE_DURATION_MAX_MS, "The window, ms"),
}

GROUP_UPDATE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {
        **_SETTINGS,
        "paused": {
            "type": "boolean",
            "description": "true pauses the group (its jobs wait), false resumes it.",
        },
        "budget_s": {
            "type": ["number", "null"],
            "minimum": 0,
            "maximum": BUDGET_MAX_S,
            "description": "GPU-seconds the group may use per UTC day; null "
            "removes the budget.",
        },
    },
}

QUOTA: dict[str, Any] = {
    "type": ["object", "null"],
    "description": "The group's GPU-time budget and its use today (UTC).",
    "required": ["budget_s", "used_s", "exhausted", "until_ms"],
    "properties": {
        "budget_s": {
            "type": ["number", "null"],
            "minimum": 0,
            "description": "GPU-seconds per UTC day (null: no budget).",
        },
        "used_s": {"type": "number", "minimum": 0},
        "exhausted": {
            "type": "boolean",
            "description": "The budget is used up: the group's jobs wait "
            "(held for its quota) until the day turns or it is raised.",
        },
        "until_ms": {
            "type": "integer",
            "description": "When today ends (UTC, epoch ms): when a quota hold ends.",
        },
    },
}

GROUP_DEFAULTS_UPDATE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": _SETTINGS,
}

GROUP_SETTINGS: dict[str, Any] = {
    "type": "object",
    "description": "Settings (null: not set).",
    "properties": {
        "weight": _INT_OR_NULL,
        "concurrency": _INT_OR_NULL,
        "rate_max": _INT_OR_NULL,
        "rate_duration_ms": _INT_OR_NULL,
    },
}

GROUP: dict[str, Any] = {
    "type": "object",
    "required": ["id", "queue", "waiting", "active", "paused"],
    "properties": {
        "id": {"type": "string"},
        "queue": {"type": "string"},
        "waiting": {"type": "integer", "minimum": 0},
        "active": {"type": "integer", "minimum": 0},
        "weight": _INT_OR_NULL,
        "concurrency": _INT_OR_NULL,
        "rate_max": _INT_OR_NULL,
        "rate_duration_ms": _INT_OR_NULL,
        "paused": {"type": "boolean"},
        "hold": {"type": ["string", "null"], "description": "A hold's reason."},
        "hold_until_ms": _INT_OR_NULL,
        "hold_info": {},
        "limited_until_ms": _INT_OR_NULL,
        "in_rotation": {"type": "boolean"},
        "state": {
            "type": "string",
            "enum": [
                "paused",
                "held",
                "rate-limited",
                "at-concurrency",
                "ready",
                "running",
                "idle",
            ],
            "description": "What the group does, as the dashboard and the CLI say "
            "it: jobs wait at-concurrency (as many run as it allows) or ready "
            "(taking turns); nothing waits: running or idle.",
        },
        "own": {
            "$ref": "#/components/schemas/GroupSettings",
            "description": "What the group sets itself; the other setting "
            "fields are the effective values.",
        },
        "quota": {"$ref": "#/components/schemas/GroupQuota"},
    },
}

GROUP_LIST: dict[str, Any] = {
    "type": "object",
    "required": ["queue", "total", "offset", "limit", "groups"],
    "properties": {
        "queue": {"type": "string"},
        "total": {"type": "integer", "minimum": 0},
        "complete": {
            "type": "boolean",
            "description": "False when a `contains` search stopped part-way "
            "through a very large index (`total` is then a lower bound).",
        },
        "offset": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1},
        "groups": {"type": "array", "items": {"$ref": "#/components/schemas/Group"}},
    },
}

GROUP_DEFAULTS: dict[str, Any] = {
    "type": "object",
    "required": ["queue", "defaults"],
    "properties": {
        "queue": {"type": "string"},
        "defaults": {"$ref": "#/components/schemas/GroupSettings"},
    },
}

GROUP_SCHEMAS: dict[str, dict[str, Any]] = {
    "Group": GROUP,
    "GroupList": GROUP_LIST,
    "GroupSettings": GROUP_SETTINGS,
    "GroupQuota": QUOTA,
    "GroupDefaults": GROUP_DEFAULTS,
    "GroupUpdate": GROUP_UPDATE,
    "GroupDefaultsUpdate": GROUP_DEFAULTS_UPDATE,
}
