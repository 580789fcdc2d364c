"""The operator app's URLconf: every page, action and fragment, /metrics,
/healthz and /readyz, relative to wherever it is included, in the `bullpen`
namespace (dashboard/console/views/urls.py). A host mounts it with
`path("ops/queues/", include("dashboard.console.urls"))`, or mounts both apps
at once with dashboard.urls (docs/embedding.md)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path

from dashboard.shared.urls import own_login

urlpatterns: list[URLPattern | URLResolver] = [
    path("", include("dashboard.console.views.urls")),
]

own_login(urlpatterns)
