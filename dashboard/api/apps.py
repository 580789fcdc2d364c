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
        from dashboard.shared.panels import add_job_panel

        from . import checks, signals  # noqa: F401  (registers them)
        from .webhooks import deliveries

        # The operator app's job page shows the job's webhook deliveries.
        add_job_panel("webhook-deliveries", deliveries.job_panel)
