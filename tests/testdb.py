"""Which database the Django tests run on.

By default SQLite, as `make run` has it. With `BULLPEN_TEST_DATABASE=postgres`
(`make test` runs tests/dashboard and tests/api a second time so), the
PostgreSQL server at `BULLPEN_TEST_POSTGRES_URL` (default
postgres://postgres@127.0.0.1:5432/postgres, trust auth; the URL names its
maintenance database):

- tests/settings.py points Django's `default` connection there with the test
  database `bullpen_test_<run>`, which pytest-django creates and migrates once
  and drops at the end of the run; every thread's connection (a channels
  consumer's, a test client's) opens that one database.
- A server process a test starts (daphne, `make run`) gets its own database
  where on SQLite it would get its own file: `subprocess_database(env)` turns
  the env's `BULLPEN_DB_PATH` into a `DATABASE_URL` naming
  `bullpen_test_<run>_<hash of the path>` (processes given one path share one
  database, as they share one file), made empty on first use; the process
  migrates it as it would the file. These are dropped when the run ends.

Whatever the run's outcome, the databases it made are dropped (the sessions
still open on them ended first); without an answering server the run is
skipped with one line saying why (tests/conftest.py).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import Any

from dashboard.dburl import parse_database_url, redact

MODES = ("sqlite", "postgres")
MODE = os.environ.get("BULLPEN_TEST_DATABASE", "sqlite") or "sqlite"
if MODE not in MODES:
    raise SystemExit(
        f"BULLPEN_TEST_DATABASE={MODE!r}: not one of {', '.join(MODES)} (unset: SQLite)"
    )
ON_POSTGRES = MODE == "postgres"
SERVER_URL = os.environ.get(
    "BULLPEN_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)
#: Names this run's databases (one pytest process, one run).
RUN = secrets.token_hex(4)
_NAMED = f"bullpen_test_{RUN}"
#: The test database: under pytest-xdist, pytest-django appends the worker's id
#: (gw0, gw1...) to the name it is given.
TEST_DATABASE = (
    f"{_NAMED}_{os.environ['PYTEST_XDIST_WORKER']}"
    if os.environ.get("PYTEST_XDIST_WORKER")
    else _NAMED
)

#: Databases made for server processes in this run, by name.
_made: set[str] = set()


def server() -> dict[str, Any]:
    """The maintenance connection's settings (`BULLPEN_TEST_POSTGRES_URL`)."""
    return parse_database_url(SERVER_URL, Path("."), conn_max_age=0)


def django_database() -> dict[str, Any]:
    """`DATABASES["default"]` of a PostgreSQL run: connections reopen per
    request as on SQLite; pytest-django makes the test database. NAME is the
    test database too, never the maintenance one: a process that reads these
    settings outside pytest-django finds no database rather than migrating
    into the server's own."""
    db = server()
    db["NAME"] = TEST_DATABASE
    db["TEST"] = {"NAME": _NAMED}
    return db


def connect(dbname: str | None = None) -> Any:
    """An autocommit psycopg connection to the test server (its maintenance
    database unless `dbname` names another)."""
    import psycopg

    db = server()
    return psycopg.connect(
        dbname=dbname or db["NAME"],
        user=db["USER"],
        password=db["PASSWORD"],
        host=db["HOST"],
        port=db["PORT"] or None,
        connect_timeout=3,
        autocommit=True,
    )


def unavailable() -> str | None:
    """Why no PostgreSQL run can happen here (None: the server answers)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (requirements.txt)"
    try:
        connect().close()
    except psycopg.Error as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else repr(exc)
        return f"no PostgreSQL server answers at {redact(SERVER_URL)} ({first})"
    return None


def url_of(name: str) -> str:
    """A postgres:// URL to database `name` on the test server."""
    base, _, query = SERVER_URL.partition("?")
    head = base.rsplit("/", 1)[0]
    return f"{head}/{name}" + (f"?{query}" if query else "")


def create_database(name: str) -> str:
    """Make the empty database `name` (dropped at the end of the run); its URL."""
    from psycopg import sql

    with connect() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    _made.add(name)
    return url_of(name)


def drop_database(name: str) -> None:
    """End the sessions still open on database `name` and drop it (absent: no-op)."""
    from psycopg import sql

    with connect() as conn:
        end_sessions(conn, name)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
    _made.discard(name)


def end_sessions(conn: Any, name: str) -> None:
    """End the sessions other than `conn`'s on database `name`: threads keep
    theirs open until they end, killed servers' may linger a moment, and DROP
    DATABASE refuses while any remains."""
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (name,),
    )


def end_test_database_sessions() -> None:
    """End the other sessions on the test database before pytest-django drops it."""
    with connect() as conn:
        end_sessions(conn, TEST_DATABASE)


def drop_made() -> None:
    """Drop every database `subprocess_database` made in this run."""
    for name in sorted(_made):
        drop_database(name)


def subprocess_database(env: dict[str, str]) -> dict[str, str]:
    """`env` (changed in place) for a server process: on a PostgreSQL run, a
    `DATABASE_URL` to the database standing for its `BULLPEN_DB_PATH`, made on
    first use (the path stays: `make run` keeps its secret key beside it)."""
    path = env.get("BULLPEN_DB_PATH")
    if ON_POSTGRES and path:
        digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()
        name = f"{TEST_DATABASE}_{digest[:12]}"
        env["DATABASE_URL"] = url_of(name) if name in _made else create_database(name)
    return env
