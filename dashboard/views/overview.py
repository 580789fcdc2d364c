"""Overview page: every queue with its counts per state."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.readmodel import queue_rows


@require_GET
@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """All configured and discovered queues with their counts."""
    return render(request, "dashboard/overview.html",
                  {"rows": queue_rows(), "redis_url": settings.REDIS_URL})
