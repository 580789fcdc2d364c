"""The host project's URLs: its own home page, Django's admin, and Bullpen's
dashboard and API under /ops/queues/ (the one line docs/embedding.md adds)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def home(request: HttpRequest) -> HttpResponse:
    """The host's own home page."""
    return HttpResponse("<h1>Host home</h1>", content_type="text/html")


urlpatterns = [
    path("", home, name="home"),
    path("admin/", admin.site.urls),
    path("ops/queues/", include("dashboard.urls")),
]
