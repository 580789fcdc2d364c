"""URL routes of the project: the producer API, Django's admin, and the pages
(every page route, GPU pages and /metrics included, is in views/urls.py)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path, re_path

from dashboard.api import errors as api_errors

urlpatterns = [
    path("api/v1/", include("dashboard.api.urls")),
    re_path(r"^api/", api_errors.api_not_found),
    path("", include("dashboard.views.urls")),
    path("admin/", admin.site.urls),
]

# JSON under /api/, Django's pages elsewhere (see dashboard/api/errors.py).
handler404 = api_errors.handler404
handler500 = api_errors.handler500
