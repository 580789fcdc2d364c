"""Websocket routes (asgi.py wraps them in the Origin check and session auth)."""

from __future__ import annotations

from django.urls import path

from dashboard.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/live/", LiveConsumer.as_asgi(), name="live"),
]
