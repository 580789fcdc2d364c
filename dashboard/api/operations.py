"""The API's operations: what one method on one path is (`Operation`), the
`@operation` decorator the views declare themselves with, and the registry it
fills. `urls.py` imports the views (which registers them) and routes the
registry; `spec.openapi()` publishes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.http import HttpResponseBase

#: An operation's view: (request, call, **path parameters) -> response.
_ViewT = TypeVar("_ViewT", bound=Callable[..., HttpResponseBase])


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
    #: "read", "write", "admin" or None (public).
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
        return re.sub(
            r"{(\w+)}",
            lambda m: f"<{_CONVERTERS.get(m[1], 'str')}:{m[1]}>",
            self.path.lstrip("/"),
        )


#: Path parameters that may hold `/` (a group id; always the last segment).
_CONVERTERS = {"group": "path"}

_REGISTERED: list[Operation] = []


def operation(**kwargs: Any) -> Callable[[_ViewT], _ViewT]:
    """Register the decorated view as an operation."""

    def register(view: _ViewT) -> _ViewT:
        op = Operation(view=view, **kwargs)
        if any(o.method == op.method and o.path == op.path for o in _REGISTERED):
            raise ValueError(f"{op.method} {op.path} is declared twice")
        _REGISTERED.append(op)
        return view

    return register


def registered() -> list[Operation]:
    """Every operation declared so far (all of them once `views` is imported,
    as `urls.py` does)."""
    return list(_REGISTERED)
