"""The standalone site's root URLconf (ROOT_URLCONF of dashboard.settings,
`make run`): the dashboard at "/", Django's admin, the favicon, and the error
handlers. A host project has its own and includes dashboard.urls instead."""

from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from dashboard import errors

urlpatterns = [
    # Browsers ask for /favicon.ico on pages without a <link rel="icon">
    # (Django's admin, the 503 page).
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("dashboard/favicon.svg"), permanent=True),
    ),
    path("admin/", admin.site.urls),
    path("", include("dashboard.urls")),
]

# JSON under /api/, the site's pages elsewhere (dashboard/errors.py).
handler404 = errors.handler404
handler500 = errors.handler500
