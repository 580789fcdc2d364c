"""The Redis page (what each server says of itself: version, mode, memory,
eviction policy, clients, ops/s, keys per prefix, slowlog, persistence) and
the workers page (every worker connected to Redis, Bullpen's and Node's),
each with the fragment htmx refreshes.

Slowlog arguments are commands' arguments: job data, and whatever secrets a
producer put in it, without the redaction hook that every other path
showing job content passes through. So everyone who may view the page sees
each entry's command, time, duration and client; its arguments (cut to a few
dozen characters each, escaped) only users who may operate queues, and
nobody while a redaction hook is set, since the hook cannot apply to them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.shared.redaction import hook_path

from ..reads import redis_panel, workers
from .common import OPERATE, VIEW, live_json, perm_required, redacted_url


def _redis_context(request: HttpRequest) -> dict[str, Any]:
    mode, panels = redis_panel.server_panels()
    may_operate = request.user.has_perm(OPERATE)
    hook = hook_path()
    return {
        "mode": mode,
        "panels": panels,
        "url": redacted_url(settings.REDIS_URL),
        "warn_pct": round(redis_panel.MEMORY_WARN_RATIO * 100),
        "show_args": may_operate and not hook,
        "args_hidden_why": (
            "a redaction hook (BULLPEN_REDACT) is set"
            if hook
            else "they may hold job data: operators only"
        ),
    }


@require_GET
@perm_required(VIEW)
def redis_page(request: HttpRequest) -> HttpResponse:
    """The whole Redis page."""
    return render(request, "dashboard/redis.html", _redis_context(request))


@require_GET
@perm_required(VIEW)
def redis_fragment(request: HttpRequest) -> HttpResponse:
    """The servers' panels alone (htmx refreshes them)."""
    return render(request, "dashboard/_redis_servers.html", _redis_context(request))


@require_GET
@perm_required(VIEW)
def workers_page(request: HttpRequest) -> HttpResponse:
    """The whole workers page."""
    # GPU workers' heartbeats changing (the workers stream) refresh the list.
    context = {"view": workers.workers_view(), "live_json": live_json(gpus=True)}
    return render(request, "dashboard/workers.html", context)


@require_GET
@perm_required(VIEW)
def workers_fragment(request: HttpRequest) -> HttpResponse:
    """The workers table alone (htmx refreshes it)."""
    context = {"view": workers.workers_view()}
    return render(request, "dashboard/_workers.html", context)
