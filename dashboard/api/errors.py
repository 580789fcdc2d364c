"""The API's answer to a path under its prefix that no version serves (the
catch-all route of dashboard/urls.py). The site's 404/500 handlers, which pick
JSON or a page by path, are the site's (dashboard/errors.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from .handling import not_found


def api_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Anything under /api/ that no version serves."""
    return not_found()
