"""Both apps under one prefix, the convenience include most hosts want: the
operator app (dashboard/console/urls.py) at the prefix, the producer API
(dashboard/api/urls.py) at `<prefix>api/v1/` with a JSON 404 for anything else
under `<prefix>api/`. A host project mounts it with
`path("ops/queues/", include("dashboard.urls"))` (docs/embedding.md); the
standalone site (dashboard/site_urls.py) includes it at "/". A host that wants
only one of the apps, or each at its own prefix, includes that app's URLconf.

Page routes are named in the `bullpen` namespace, API routes in
`bullpen_api`, so that none clashes with a host's names."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path, re_path

from dashboard.api import errors as api_errors
from dashboard.shared.urls import own_login

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/v1/", include("dashboard.api.urls")),
    re_path(r"^api/", api_errors.api_not_found),
    path("", include("dashboard.console.urls")),
]

own_login(urlpatterns)
