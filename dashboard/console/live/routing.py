"""Websocket routes (asgi.py wraps them in the Origin check and session auth)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.urls import path

from dashboard.console.live.consumers import LiveConsumer

if TYPE_CHECKING:
    from channels.routing import URLRouter, _ExtendedURLPattern

# django-stubs types path() for Django views only; channels routes ASGI apps
# with it, and types such a route as an _ExtendedURLPattern.
websocket_urlpatterns: list[_ExtendedURLPattern | URLRouter] = [
    cast(
        "_ExtendedURLPattern",
        path("ws/live/", LiveConsumer.as_asgi(), name="live"),  # type: ignore[arg-type]
    ),
]
