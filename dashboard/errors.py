"""The standalone site's error handlers (`handler404`/`handler500` of
dashboard/site_urls.py, run only with DEBUG off): the API's JSON under /api/,
where the site mounts it, and the site's own pages (templates/site/404.html,
templates/site/500.html: under site/, so that they never stand in for a host
project's 404.html) elsewhere. The apps answer their own errors in their views;
these are for what no view answered."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views import defaults

from dashboard.api.handling import internal_error, not_found


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def handler404(request: HttpRequest, exception: Any = None) -> HttpResponse:
    """JSON 404 under /api/, else the site's 404 page."""
    if _is_api(request):
        return not_found()
    return defaults.page_not_found(request, exception, template_name="site/404.html")


def handler500(request: HttpRequest) -> HttpResponse:
    """JSON 500 under /api/ (no traceback), else the site's 500 page."""
    if _is_api(request):
        return internal_error()
    return defaults.server_error(request, template_name="site/500.html")
