"""The dashboard deployed on PostgreSQL (DATABASE_URL=postgres://...), where it
differs from SQLite: `migrate` builds an empty database, `check --deploy` is
clean, a server process under concurrent requests leaves no connection open
(dashboard/console/db.py), and its live sockets share one kept connection, replaced
when the database server ends it. Each test has a database of its own
on the server of tests/testdb.py, dropped afterwards; skipped where none
answers."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from tests import testdb
from tests.dashboard.daphne_helpers import LiveSocket, daphne, viewer_session
from tests.dashboard.test_production_settings import PRODUCTION, manage
from tests.helpers import wait_until

_why = testdb.unavailable()
if _why:
    pytest.skip(f"PostgreSQL: {_why}", allow_module_level=True)


@pytest.fixture
def database() -> Iterator[tuple[str, str]]:
    """An empty database of its own: its name and DATABASE_URL."""
    name = f"{testdb.TEST_DATABASE}_{secrets.token_hex(4)}"
    url = testdb.create_database(name)
    try:
        yield name, url
    finally:
        testdb.drop_database(name)


def sessions_on(name: str) -> set[int]:
    """The server's process ids of the sessions open on database `name`."""
    with testdb.connect() as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchall()
    return {row[0] for row in rows}


def test_migrate_an_empty_database_then_check_deploy(
    database: tuple[str, str],
) -> None:
    """`migrate` on an empty PostgreSQL database applies everything (the
    groups' data migration included); `check --deploy` is then clean with
    the documented production variables."""
    name, url = database
    env: dict[str, Any] = {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": url,
    }
    done = manage("migrate", "--noinput", **env)
    assert done.returncode == 0, done.stderr
    assert manage("migrate", "--check", **env).returncode == 0
    with testdb.connect(name) as conn:
        groups = conn.execute("SELECT name FROM auth_group ORDER BY name").fetchall()
    assert [g[0] for g in groups] == ["operator", "scaler", "viewer"]
    check = manage("check", "--deploy", "--fail-level", "WARNING", **env, **PRODUCTION)
    assert check.returncode == 0, check.stderr
    assert "no issues" in check.stdout


def test_concurrent_requests_leave_no_connection_open(
    database: tuple[str, str], redis_url: str, tmp_path: Path
) -> None:
    """Logged-in requests to one daphne, eight at a time, all succeed, and
    each request's connection is closed at its end: none is left open
    (without dashboard/console/db.py, kept for BULLPEN_DB_CONN_MAX_AGE for later
    requests that under daphne never come, 40 requests left over 20 open)."""
    name, url = database
    with daphne(tmp_path, redis_url, DATABASE_URL=url) as server:
        cookies = {"sessionid": viewer_session(server.env)}

        def page(_: int) -> int:
            got = requests.get(server.url + "/", cookies=cookies, timeout=10)
            return got.status_code

        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(page, range(40))) == [200] * 40
        wait_until(
            lambda: not sessions_on(name),
            timeout=5,
            what=f"no session open on {name}",
        )


def test_live_sockets_share_a_kept_connection_and_replace_an_ended_one(
    database: tuple[str, str], redis_url: str, tmp_path: Path
) -> None:
    """The live sockets of one daphne do their database work on one kept
    connection (BULLPEN_DB_CONN_MAX_AGE); when the database server ends it,
    the next sockets still open, on a new one (health checks)."""
    name, url = database
    with daphne(tmp_path, redis_url, DATABASE_URL=url) as server:
        session = viewer_session(server.env)

        async def open_and_close(n: int) -> None:
            socks = await asyncio.gather(
                *(LiveSocket.open(server.url, session) for _ in range(n))
            )
            for sock in socks:
                sock.close()

        asyncio.run(open_and_close(10))
        kept = sessions_on(name)
        assert len(kept) == 1, kept
        with testdb.connect() as conn:
            testdb.end_sessions(conn, name)
        wait_until(lambda: not sessions_on(name), timeout=5, what="sessions ended")
        asyncio.run(open_and_close(10))
        renewed = sessions_on(name)
        assert len(renewed) == 1 and renewed != kept, (kept, renewed)
