"""The operator app (`dashboard.console`, label `dashboard`): registers its
system checks and signal receivers."""

from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """Bullpen's dashboard app (pages, actions, audit log)."""

    name = "dashboard.console"
    # The label it had before the split: its tables, migrations and
    # permissions (`dashboard.operate_queues`) keep their names.
    label = "dashboard"
    verbose_name = "Bullpen dashboard"

    def ready(self) -> None:
        from dashboard.shared.audit import add_audit_writer

        from . import (  # noqa: F401
            checks,  # (registers the checks)
            db,  # (HTTP requests close their connections)
            mount_checks,  # (registers the mount checks)
        )
        from .audit import record_as
        from .live import access  # noqa: F401  (logging out closes live sockets)

        # The producer API's admin actions land in this app's audit log.
        add_audit_writer(self.label, record_as)
