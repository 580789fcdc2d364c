"""Routes of /api/v1/, generated from the operations the views register (one
view per path, dispatching by method), then a JSON 404 for anything else
under the prefix."""

from __future__ import annotations

from collections import defaultdict

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, path, re_path

from dashboard.shared.urls import own_login

from . import views  # noqa: F401  (importing the views registers them)
from .handling import not_found, route
from .operations import Operation, registered

app_name = "bullpen_api"


def _patterns() -> list[URLPattern | URLResolver]:
    by_path: dict[str, list[Operation]] = defaultdict(list)
    for op in registered():
        by_path[op.path].append(op)
    patterns: list[URLPattern | URLResolver] = []
    for api_path, ops in by_path.items():
        name = "openapi" if api_path == "/openapi.json" else None
        patterns.append(path(ops[0].django_route, route(ops), name=name))
    return patterns


def unmatched(request: HttpRequest, rest: str = "") -> HttpResponse:
    """No such API route: a JSON 404, never the HTML page."""
    return not_found()


urlpatterns = _patterns() + [re_path(r"^(?P<rest>.*)$", unmatched)]

# Views check their own tokens: a host's LoginRequiredMiddleware leaves them be.
own_login(urlpatterns)
