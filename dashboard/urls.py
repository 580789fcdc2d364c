"""URL routes of the dashboard."""

from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from dashboard.api import errors as api_errors
from dashboard.views import gpus
from dashboard.views import metrics as metrics_views

urlpatterns = [
    path("api/v1/", include("dashboard.api.urls")),
    re_path(r"^api/", api_errors.api_not_found),
    path("metrics", metrics_views.metrics, name="metrics"),
    # Browsers ask for /favicon.ico on pages without a <link rel="icon">
    # (Django's admin, the 503 page).
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("dashboard/favicon.svg"), permanent=True),
    ),
    path("gpus/", gpus.gpus_page, name="gpus"),
    path("gpus/fragments/hosts/", gpus.hosts_fragment, name="gpus-hosts"),
    path("gpus/fragments/capacity/", gpus.capacity_fragment, name="gpus-capacity"),
    path("gpus/actions/scale/", gpus.scale, name="gpus-scale"),
    path("", include("dashboard.views.urls")),
    path("admin/", admin.site.urls),
]

# JSON under /api/, Django's pages elsewhere (see dashboard/api/errors.py).
handler404 = api_errors.handler404
handler500 = api_errors.handler500
