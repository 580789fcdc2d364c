"""The tests run on the database the run asked for (tests/testdb.py): SQLite,
or on a PostgreSQL run the run's own migrated test database, which every
thread's connection opens too (a channels consumer reads users and sessions
from a thread of its own)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group, User
from django.db import connection

from tests import testdb


def _where() -> tuple[str, str]:
    """This thread's connection: its vendor and the database it is on."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT current_database()")
            return connection.vendor, cursor.fetchone()[0]
        return connection.vendor, str(connection.settings_dict["NAME"])


@pytest.mark.django_db
def test_the_database_is_the_one_the_run_asked_for() -> None:
    """The migration's groups are there, in the vendor's test database."""
    vendor, name = _where()
    if testdb.ON_POSTGRES:
        assert (vendor, name) == ("postgresql", testdb.TEST_DATABASE)
    else:
        assert vendor == "sqlite"
    assert {"viewer", "operator", "scaler"} <= set(
        Group.objects.values_list("name", flat=True)
    )


@pytest.mark.django_db(transaction=True)
def test_other_threads_use_the_same_database() -> None:
    """A user made here is seen from a plain thread and from channels'
    database_sync_to_async, each on its own connection."""
    User.objects.create_user("seen-elsewhere")
    here = _where()

    def look() -> tuple[tuple[str, str], bool]:
        found = User.objects.filter(username="seen-elsewhere").exists()
        return _where(), found

    def look_and_close() -> tuple[tuple[str, str], bool]:
        try:
            return look()
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(look_and_close).result() == (here, True)
    assert async_to_sync(database_sync_to_async(look))() == (here, True)
