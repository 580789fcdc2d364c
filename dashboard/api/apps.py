"""The producer API app (label `bullpen_api`)."""

from __future__ import annotations

from django.apps import AppConfig


class ApiConfig(AppConfig):
    """API tokens, webhook subscriptions, the /api/v1/ views."""

    name = "dashboard.api"
    label = "bullpen_api"
    verbose_name = "Bullpen producer API"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, signals  # noqa: F401  (registers them)
