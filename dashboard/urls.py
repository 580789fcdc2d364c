"""URL routes of the dashboard."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from dashboard.views import overview

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("admin/", admin.site.urls),
]
