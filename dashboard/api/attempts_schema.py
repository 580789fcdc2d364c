"""The JSON Schema of a job's `attempt_history` (gpu_workers/attempts.py),
in the OpenAPI document as `AttemptHistory`."""

from __future__ import annotations

from typing import Any

from queues.attempts import OUTCOMES

_INT_OR_NULL: dict[str, Any] = {"type": ["integer", "null"]}
_TEXT_OR_NULL: dict[str, Any] = {"type": ["string", "null"]}

ATTEMPT: dict[str, Any] = {
    "type": "object",
    "required": ["attempt", "outcome"],
    "properties": {
        "attempt": {"type": "integer", "minimum": 1},
        "started_ms": _INT_OR_NULL,
        "ended_ms": _INT_OR_NULL,
        "duration_ms": _INT_OR_NULL,
        "worker": _TEXT_OR_NULL,
        "host": _TEXT_OR_NULL,
        "pid": _INT_OR_NULL,
        "gpu": _TEXT_OR_NULL,
        "gpu_seconds": {
            "type": ["number", "null"],
            "description": "GPU workers only: wall seconds the attempt ran on "
            "its GPU (docs/operations.md, GPU-time accounting)",
        },
        "outcome": {"enum": [*OUTCOMES, "running"]},
        "error": _TEXT_OR_NULL,
        "code": {
            **_INT_OR_NULL,
            "description": "lost only: the code Redis refused the finish with",
        },
        "delay_ms": {**_INT_OR_NULL, "description": "retried only: the backoff"},
    },
}

ATTEMPT_HISTORY: dict[str, Any] = {
    "type": "object",
    "required": ["source", "started", "unrecorded", "items"],
    "description": "Each attempt of the job, oldest first: recorded by Bullpen's "
    "workers (source `recorded`), or, for a job no Bullpen worker ran (a Node "
    "BullMQ worker's), derived from BullMQ's fields (source `bullmq`: every "
    "attempt numbered, errors from its stack traces, times of the last one).",
    "properties": {
        "source": {"enum": ["recorded", "bullmq"]},
        "started": {"type": "integer", "minimum": 0},
        "unrecorded": {"type": "integer", "minimum": 0},
        "gpu_seconds": {
            "type": ["number", "null"],
            "description": "the sum of the items' gpu_seconds (null: none ran "
            "on a GPU)",
        },
        "items": {"type": "array", "items": ATTEMPT},
    },
}
