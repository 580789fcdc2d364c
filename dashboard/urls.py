"""The dashboard's mountable URLconf: every page, action, fragment, the
producer API, /metrics, /healthz and /readyz, relative to wherever it is
included. A host project mounts it with
`path("ops/queues/", include("dashboard.urls"))` (docs/embedding.md); the
standalone site (dashboard/site_urls.py) includes it at "/".

Page routes are named in the `bullpen` namespace (dashboard/console/views/urls.py),
API routes in `bullpen_api`, so that none clashes with a host's names."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.decorators import login_not_required
from django.urls import URLPattern, URLResolver, include, path, re_path

from dashboard.api import errors as api_errors

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/v1/", include("dashboard.api.urls")),
    re_path(r"^api/", api_errors.api_not_found),
    path("", include("dashboard.console.views.urls")),
]


def _own_login(patterns: Sequence[URLPattern | URLResolver]) -> None:
    """Mark every view as checking its own user (pages send anonymous users
    to the dashboard's login page, the API takes tokens, the probes and
    /metrics none), so that a host's LoginRequiredMiddleware leaves them to it."""
    for entry in patterns:
        if isinstance(entry, URLResolver):
            _own_login(entry.url_patterns)
        else:
            login_not_required(entry.callback)


_own_login(urlpatterns)
