"""The groups that carry the dashboard's permissions: viewer, operator, scaler.

Each level includes the one before it: a viewer reads every page, an operator
also acts on jobs and queues, a scaler also changes capacity (desired workers,
global concurrency, rate limits).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

GROUPS = {
    "viewer": ["view_queues"],
    "operator": ["view_queues", "operate_queues"],
    "scaler": ["view_queues", "operate_queues", "scale_workers"],
}


def create_groups(apps: Any, schema_editor: Any) -> None:
    """Create the groups and their permissions (permissions are normally made
    after migrations, too late for this one, so they are made here first)."""
    from django.contrib.auth.management import create_permissions

    app_config = apps.get_app_config("dashboard")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=name)
        perms = Permission.objects.filter(
            content_type__app_label="dashboard", codename__in=codenames
        )
        group.permissions.add(*perms)


def remove_groups(apps: Any, schema_editor: Any) -> None:
    """Delete the groups (users keep their accounts)."""
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
