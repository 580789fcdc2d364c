"""Websocket routes of the operator app (an ASGI module wraps them in the
Origin check and session auth: dashboard/asgi.py, or a host's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from channels.routing import URLRouter
from django.urls import path

from dashboard.console.live.consumers import LiveConsumer

if TYPE_CHECKING:
    from channels.routing import _ExtendedURLPattern

# django-stubs types path() for Django views only; channels routes ASGI apps
# with it, and types such a route as an _ExtendedURLPattern.
websocket_urlpatterns: list[_ExtendedURLPattern | URLRouter] = [
    cast(
        "_ExtendedURLPattern",
        path("ws/live/", LiveConsumer.as_asgi(), name="live"),  # type: ignore[arg-type]
    ),
]


def websocket_urls(prefix: str) -> list[_ExtendedURLPattern | URLRouter]:
    """The live-updates socket under `prefix`, the same prefix the pages are
    included at (e.g. "ops/queues/"; "" at the root), so that the pages find
    it at `<prefix>ws/live/`. Only routes: nothing starts."""
    if not prefix:
        return list(websocket_urlpatterns)
    nested = path(prefix, URLRouter(websocket_urlpatterns))  # type: ignore[arg-type]
    return [cast("_ExtendedURLPattern", nested)]
