"""The OpenAPI document of the API, built from the registered operations
(see `operations`): `urls.py` routes the same registry, so the document
cannot describe a route that does not exist or miss one that does.
"""

from __future__ import annotations

from typing import Any

from queues.names import SAFE_QUEUE_NAME_PATTERN

from . import schemas
from .grouping import GROUP_ID_PATTERN
from .operations import Operation, registered

#: Schemas of the path parameters, by name.
PATH_PARAMS: dict[str, dict[str, Any]] = {
    "queue": {"type": "string", "pattern": SAFE_QUEUE_NAME_PATTERN},
    "job_id": {"type": "string", "pattern": schemas.JOB_ID_PATTERN},
    "group": {"type": "string", "pattern": GROUP_ID_PATTERN},
}

#: Responses every authenticated operation may give.
COMMON_ERRORS: dict[int, str] = {
    400: "Invalid request (see error.code)",
    401: "Missing, unknown or revoked token",
    403: "The token may not use this queue, or lacks the scope (groups: admin)",
    429: "Over the token's rate limit (Retry-After)",
    503: "Redis is unavailable",
}


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
        },
    }


def _operation_doc(op: Operation) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "tags": list(op.tags),
        "parameters": [
            {"name": n, "in": "path", "required": True, "schema": PATH_PARAMS[n]}
            for n in op.path_params
        ]
        + [
            {
                "name": p.name,
                "in": p.location,
                "required": False,
                "schema": p.schema,
                **({"description": p.description} if p.description else {}),
            }
            for p in op.params
        ],
        "responses": {},
    }
    if op.description:
        doc["description"] = op.description
    if op.scope is None:
        doc["security"] = []
    else:
        doc["security"] = [{"bearer": []}] + ([{"ticket": []}] if op.tickets else [])
        doc["x-scope"] = op.scope
    if op.request_schema:
        doc["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"$ref": f"#/components/schemas/{op.request_schema}"}
                }
            },
        }
    responses: dict[str, Any] = {}
    for status, (description, schema) in op.responses.items():
        if status >= 400:
            responses[str(status)] = _error_response(description)
        elif op.event_stream and status == 200:
            responses[str(status)] = {
                "description": description,
                "content": {
                    "text/event-stream": {
                        "schema": {"$ref": "#/components/schemas/SseEvent"}
                    }
                },
            }
        else:
            content = (
                {
                    "application/json": {
                        "schema": {"$ref": f"#/components/schemas/{schema}"}
                    }
                }
                if schema
                else {}
            )
            responses[str(status)] = {"description": description, "content": content}
    if op.scope is not None:
        for status, description in COMMON_ERRORS.items():
            responses.setdefault(str(status), _error_response(description))
    if op.request_schema:
        responses.setdefault("413", _error_response("Body over the size cap"))
        responses.setdefault("415", _error_response("Body is not application/json"))
    responses.setdefault("405", _error_response("Method not allowed on this path"))
    doc["responses"] = dict(sorted(responses.items()))
    return doc


def openapi(server: str = "/api/v1") -> dict[str, Any]:
    """The OpenAPI 3.1 document of /api/v1/, served from `server` (the API's
    path where the dashboard is mounted)."""
    paths: dict[str, dict[str, Any]] = {}
    for op in registered():
        paths.setdefault(op.path, {})[op.method.lower()] = _operation_doc(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Bullpen producer API",
            "version": "1.0.0",
            "description": "Enqueue jobs, follow them (status, Server-Sent Events, "
            "webhooks), act on them as operators do (retry, promote, change "
            "priority, duplicate), cancel them, and (admin tokens) set the fair turns "
            "of their groups. Errors are JSON "
            '{"error": {"code", "message", "details"}} with a stable code.',
        },
        "servers": [{"url": server}],
        "paths": paths,
        "components": {
            "schemas": schemas.COMPONENTS,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API token: `manage.py apitoken create` or "
                    "the Django admin.",
                },
                "ticket": {
                    "type": "apiKey",
                    "in": "query",
                    "name": "ticket",
                    "description": "The `ticket` an enqueue returned: read-only "
                    "access to that one job.",
                },
            },
        },
    }
