"""Error handlers for the project URLconf: JSON under /api/, Django's pages
elsewhere. (`handler404`/`handler500` only run with DEBUG off; the API's own
views and its catch-all route answer JSON with DEBUG on as well.)"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views import defaults

from .handling import internal_error, not_found


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def api_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Anything under /api/ that no version serves."""
    return not_found()


def handler404(request: HttpRequest, exception: Any = None) -> HttpResponse:
    """JSON 404 under /api/, else Django's page."""
    if _is_api(request):
        return not_found()
    return defaults.page_not_found(
        request, exception, template_name="dashboard/404.html"
    )


def handler500(request: HttpRequest) -> HttpResponse:
    """JSON 500 under /api/ (no traceback), else Django's page."""
    if _is_api(request):
        return internal_error()
    return defaults.server_error(request)
