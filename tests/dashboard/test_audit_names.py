"""Audit action names follow one scheme, `<what>.<verb>`, old rows included
(tests/dashboard/test_gpus.py checks the name scaling writes now), and the
audit page filters by them."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from dashboard.console.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)


def test_migration_renames_old_rows() -> None:
    """Rows written as `scale_workers` read `workers.scale` after migrating,
    so filtering by action finds old and new rows alike; and back."""
    executor = MigrationExecutor(connection)
    executor.migrate([("dashboard", "0002_groups")])
    apps = executor.loader.project_state([("dashboard", "0002_groups")]).apps
    entry = apps.get_model("dashboard", "AuditEntry").objects.create(
        username="u", target="bull:gpu", action="scale_workers", outcome="ok"
    )
    executor = MigrationExecutor(connection)
    executor.migrate([("dashboard", "0003_audit_action_names")])
    apps = executor.loader.project_state(
        [("dashboard", "0003_audit_action_names")]
    ).apps
    model = apps.get_model("dashboard", "AuditEntry")
    assert model.objects.get(pk=entry.pk).action == "workers.scale"
    executor = MigrationExecutor(connection)
    executor.migrate([("dashboard", "0002_groups")])
    assert model.objects.get(pk=entry.pk).action == "scale_workers"
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_audit_page_filters_by_action_and_family(admin_client: Client) -> None:
    """`?action=` keeps one action's rows (or a family's, by its prefix)."""
    for action in ("workers.scale", "job.retry", "job.remove", "queue.pause"):
        AuditEntry.objects.create(
            username="u", target="bull:gpu", action=action, outcome="ok"
        )

    def shown(action: str) -> set[str]:
        html = admin_client.get("/audit/", {"action": action}).content.decode()
        return set(re.findall(r'<a href="\?action=[^"]*">([^<]+)</a>', html))

    assert shown("workers.scale") == {"workers.scale"}
    assert shown("job.") == {"job.retry", "job.remove"}
    assert shown("") == {"workers.scale", "job.retry", "job.remove", "queue.pause"}
