"""The dashboard's mountable URLconf: every page, action, fragment, the
producer API, /metrics, /healthz and /readyz, relative to wherever it is
included. A host project mounts it with
`path("ops/queues/", include("dashboard.urls"))` (docs/embedding.md); the
standalone site (dashboard/site_urls.py) includes it at "/".

Page routes are named in the `bullpen` namespace (dashboard/views/urls.py),
API routes in `bullpen_api`, so that none clashes with a host's names."""

from __future__ import annotations

from django.urls import include, path, re_path

from dashboard.api import errors as api_errors

urlpatterns = [
    path("api/v1/", include("dashboard.api.urls")),
    re_path(r"^api/", api_errors.api_not_found),
    path("", include("dashboard.views.urls")),
]
