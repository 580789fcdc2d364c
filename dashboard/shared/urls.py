"""What both apps' URLconfs do to their routes."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.decorators import login_not_required
from django.urls import URLPattern, URLResolver


def own_login(patterns: Sequence[URLPattern | URLResolver]) -> None:
    """Mark every view as checking its own user (pages send anonymous users
    to the dashboard's login page, the API takes tokens, the probes and
    /metrics none), so that a host's LoginRequiredMiddleware leaves them to it."""
    for entry in patterns:
        if isinstance(entry, URLResolver):
            own_login(entry.url_patterns)
        else:
            login_not_required(entry.callback)
