"""Audit action names follow one scheme, `<what>.<verb>`, old rows included
(tests/dashboard/test_gpus.py checks the name scaling writes now)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

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
