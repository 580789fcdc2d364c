"""The PostgreSQL suite: dashboard and API tests written for SQLite, run again
on the PostgreSQL server of this machine (127.0.0.1:5432, trust auth; another
with BULLPEN_TEST_POSTGRES_URL=postgres://user@host:port/maintenance-db).

For this package only, Django's `default` connection is swapped for one to
PostgreSQL and a database `bullpen_test_<random>` is made and migrated by
Django's own test machinery; it is dropped, and the SQLite connection the rest
of the run uses put back, when the package is done. A module here imports the
tests it re-runs (and their conftest's fixtures); they run unchanged. Without
an answering server, or without psycopg, every test here is skipped with a
line saying why."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.test.utils import setup_databases, teardown_databases

from dashboard.dburl import parse_database_url, redact

POSTGRES_URL = os.environ.get(
    "BULLPEN_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)


def _postgres_or_skip(db: dict[str, Any]) -> None:
    try:
        import psycopg
    except ImportError:
        pytest.skip("PostgreSQL tests: psycopg is not installed (requirements.txt)")
    try:
        _connect(db).close()
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        pytest.skip(
            f"PostgreSQL tests: no server answers at {redact(POSTGRES_URL)} ({first})"
        )


def _connect(db: dict[str, Any]) -> Any:
    import psycopg

    return psycopg.connect(
        dbname=db["NAME"],
        user=db["USER"],
        password=db["PASSWORD"],
        host=db["HOST"],
        port=db["PORT"] or None,
        connect_timeout=3,
        autocommit=True,
    )


def _end_sessions_on(db: dict[str, Any], name: str) -> None:
    """End the sessions that threads of tests opened on database `name` and
    left open (each thread has its own connection, which Django closes only
    at the end of a request): DROP DATABASE refuses while any remains."""
    with _connect(db) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )


@pytest.fixture(scope="package")
def django_db_setup(
    django_db_blocker: Any, django_test_environment: None
) -> Iterator[None]:
    """A fresh PostgreSQL test database for this package's tests."""
    db = parse_database_url(POSTGRES_URL, Path("."), conn_max_age=0)
    _postgres_or_skip(db)
    name = f"bullpen_test_{secrets.token_hex(4)}"
    db["TEST"] = {"NAME": name}
    with django_db_blocker.unblock():
        old_settings = connections.settings["default"]
        old_connection = connections["default"]
        old_databases = settings.DATABASES
        connections.settings["default"] = db
        connections.configure_settings(connections.settings)  # fills defaults
        connections["default"] = connections.create_connection("default")
        settings.DATABASES = {**old_databases, "default": db}
        try:
            config = setup_databases(
                verbosity=0,
                interactive=False,
                aliases={"default"},
                serialized_aliases=set(),
            )
            try:
                assert connections["default"].vendor == "postgresql"
                assert connections["default"].settings_dict["NAME"] == name
                yield
            finally:
                connections["default"].close()
                _end_sessions_on(db, name)
                teardown_databases(config, verbosity=0)
        finally:
            connections["default"].close()
            connections.settings["default"] = old_settings
            connections["default"] = old_connection
            settings.DATABASES = old_databases
