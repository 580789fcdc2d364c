"""The tests here do run on PostgreSQL, in a database of their own."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection


@pytest.mark.django_db
def test_the_database_is_a_fresh_migrated_postgres_one() -> None:
    assert connection.vendor == "postgresql"
    assert connection.settings_dict["NAME"].startswith("test_bullpen_test_") or (
        connection.settings_dict["NAME"].startswith("bullpen_test_")
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        assert cursor.fetchone()[0] == connection.settings_dict["NAME"]
    # The data migration's groups are there.
    assert {"viewer", "operator", "scaler"} <= set(
        Group.objects.values_list("name", flat=True)
    )
