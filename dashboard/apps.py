"""For a host project written before the split (Bullpen 0.1), which lists
"dashboard" in INSTALLED_APPS: the operator app is `dashboard.console` now.
Listing "dashboard" installs this config instead, whose only work is that
`manage.py check` says exactly what to change (bullpen.E014). The standalone
site never lists it."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, register


class MovedDashboardConfig(AppConfig):
    """`"dashboard"` in INSTALLED_APPS: the operator app moved."""

    name = "dashboard"
    label = "bullpen_moved"
    verbose_name = "Bullpen dashboard (moved to dashboard.console)"

    def ready(self) -> None:
        register(moved_app_check)


def moved_app_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """bullpen.E014: INSTALLED_APPS names the package, not the app."""
    return [
        Error(
            'INSTALLED_APPS lists "dashboard": the Bullpen operator app is '
            '"dashboard.console" since Bullpen 0.2',
            hint='Replace "dashboard" with "dashboard.console" in INSTALLED_APPS '
            '(its app label stays "dashboard": your tables, migrations and '
            "permissions are kept)",
            id="bullpen.E014",
        )
    ]
