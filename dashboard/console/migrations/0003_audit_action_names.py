"""Audit action names follow one scheme, `<what>.<verb>` (`queue.pause`,
`job.retry`, `workers.scale`): rows written as `scale_workers` are renamed so
that filtering by action finds old and new entries alike."""

from __future__ import annotations

from typing import Any

from django.db import migrations

#: Old action name -> the name the scheme gives it.
RENAMED = {"scale_workers": "workers.scale"}


def rename(apps: Any, schema_editor: Any) -> None:
    """Rewrite old names to the scheme."""
    entries = apps.get_model("dashboard", "AuditEntry").objects
    for old, new in RENAMED.items():
        entries.filter(action=old).update(action=new)


def rename_back(apps: Any, schema_editor: Any) -> None:
    """Restore the old names (for a rollback to code that wrote them)."""
    entries = apps.get_model("dashboard", "AuditEntry").objects
    for old, new in RENAMED.items():
        entries.filter(action=new).update(action=old)


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0002_groups")]

    operations = [migrations.RunPython(rename, rename_back)]
