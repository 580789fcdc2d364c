"""The one declarative description of the API: every operation's method,
path, scope, parameters, request and response schemas, and the view that
serves it. `urls.py` routes from it and `openapi()` publishes it, so the
document cannot describe a route that does not exist or miss one that does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.http import HttpResponseBase

from . import schemas

#: An operation's view: (request, call, **path parameters) -> response.
_ViewT = TypeVar("_ViewT", bound=Callable[..., HttpResponseBase])

#: Schemas of the path parameters, by name.
PATH_PARAMS: dict[str, dict[str, Any]] = {
    "queue": {"type": "string", "pattern": schemas.QUEUE_NAME_PATTERN},
    "job_id": {"type": "string", "pattern": schemas.JOB_ID_PATTERN},
}

#: Responses every authenticated operation may give.
COMMON_ERRORS: dict[int, str] = {
    400: "Invalid request (see error.code)",
    401: "Missing, unknown or revoked token",
    403: "The token may not use this queue, or lacks the scope",
    429: "Over the token's rate limit (Retry-After)",
    503: "Redis is unavailable",
}


@dataclass(frozen=True)
class Param:
    """A query or header parameter."""

    name: str
    location: str  # "query" | "header"
    schema: dict[str, Any]
    description: str = ""


@dataclass(frozen=True)
class Operation:
    """One method on one path."""

    method: str
    path: str
    operation_id: str
    summary: str
    view: Callable[..., HttpResponseBase]
    #: "read", "write" or None (public).
    scope: str | None
    #: 2xx (and operation-specific 4xx) responses: status -> (description, schema).
    responses: dict[int, tuple[str, str | None]]
    request_schema: str | None = None
    params: tuple[Param, ...] = ()
    #: A job ticket (?ticket=) may stand in for a token.
    tickets: bool = False
    #: The 2xx body is text/event-stream.
    event_stream: bool = False
    description: str = ""
    tags: tuple[str, ...] = field(default=("jobs",))

    @property
    def path_params(self) -> list[str]:
        """Names of the `{name}` segments."""
        return re.findall(r"{(\w+)}", self.path)

    @property
    def django_route(self) -> str:
        """The path as a Django route (no leading slash)."""
        return re.sub(r"{(\w+)}", r"<str:\1>", self.path.lstrip("/"))


OPERATIONS: list[Operation] = []


def operation(**kwargs: Any) -> Callable[[_ViewT], _ViewT]:
    """Register the decorated view as an operation."""

    def register(view: _ViewT) -> _ViewT:
        op = Operation(view=view, **kwargs)
        if any(o.method == op.method and o.path == op.path for o in OPERATIONS):
            raise ValueError(f"{op.method} {op.path} is declared twice")
        OPERATIONS.append(op)
        return view

    return register


def operations() -> list[Operation]:
    """Every operation (importing the views registers them)."""
    from . import views  # noqa: F401

    return list(OPERATIONS)


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


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of /api/v1/."""
    paths: dict[str, dict[str, Any]] = {}
    for op in operations():
        paths.setdefault(op.path, {})[op.method.lower()] = _operation_doc(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Bullpen producer API",
            "version": "1.0.0",
            "description": "Enqueue jobs, follow them (status, Server-Sent Events, "
            "webhooks) and cancel them. Errors are JSON "
            '{"error": {"code", "message", "details"}} with a stable code.',
        },
        "servers": [{"url": "/api/v1"}],
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
