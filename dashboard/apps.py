"""The operator app: registers its system checks and signal receivers."""

from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """Bullpen's dashboard app (pages, actions, audit log)."""

    name = "dashboard"
    verbose_name = "Bullpen dashboard"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401  (registers the checks)
            db,  # noqa: F401  (HTTP requests close their connections)
        )
        from .live import access  # noqa: F401  (logging out closes live sockets)
