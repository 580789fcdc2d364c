"""Fixtures shared by every test: a real redis-server started for the session."""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.db.models.signals import post_migrate

from queues import Queue
from queues.devredis import interrupt_on_sigterm
from tests import testdb
from tests.redis_server import RedisServer


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a CI timeout, `timeout`, a closed job) ends the run as Ctrl-C
    does, so fixtures tear down: the session's redis-server and the helper
    processes tests start in their own sessions are stopped, not orphaned."""
    interrupt_on_sigterm()


#: Why this PostgreSQL run cannot happen (None: it can, or it is no such run).
_postgres_missing: str | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    """A PostgreSQL run (BULLPEN_TEST_DATABASE=postgres) asks its server first."""
    global _postgres_missing
    if testdb.ON_POSTGRES:
        _postgres_missing = testdb.unavailable()


def pytest_report_header(config: pytest.Config) -> str:
    """Which database this run's Django tests use (make test runs two)."""
    if testdb.ON_POSTGRES:
        return (
            f"database: PostgreSQL at {testdb.redact(testdb.SERVER_URL)}, "
            f"test database {testdb.TEST_DATABASE}"
        )
    return "database: SQLite (BULLPEN_TEST_DATABASE=postgres: PostgreSQL)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[Any]) -> None:
    """Without an answering server a PostgreSQL run runs nothing."""
    if _postgres_missing:
        config.hook.pytest_deselected(items=list(items))
        items.clear()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """...and says why, in one line."""
    if _postgres_missing:
        terminalreporter.write_line(f"PostgreSQL run skipped: {_postgres_missing}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The databases made for server processes go, whatever the outcome; a
    PostgreSQL run skipped for want of a server passes."""
    if testdb.ON_POSTGRES:
        if _postgres_missing:
            session.exitstatus = pytest.ExitCode.OK
        else:
            testdb.drop_made()


def _groups_again(sender: Any, **kwargs: Any) -> None:
    """A transactional test ends with a flush of every table; the post_migrate
    sent after it makes the permissions again but not the groups the data
    migration made. Made again here, so a test that runs after one (pytest-xdist
    runs files in any order) finds the database as migrated."""
    if getattr(sender, "label", None) != "dashboard":
        return
    from django.contrib.auth.models import Group, Permission

    groups = importlib.import_module("dashboard.console.migrations.0002_groups").GROUPS
    for name, codenames in groups.items():
        group, _ = Group.objects.using(kwargs["using"]).get_or_create(name=name)
        group.permissions.add(
            *Permission.objects.using(kwargs["using"]).filter(
                content_type__app_label="dashboard", codename__in=codenames
            )
        )


post_migrate.connect(_groups_again, dispatch_uid="tests.groups_again")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's test database; on PostgreSQL, the sessions other
    threads left open on it are ended before pytest-django drops it."""
    yield
    if testdb.ON_POSTGRES:
        testdb.end_test_database_sessions()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the whole run, on a free port, no persistence."""
    server = RedisServer().start()
    os.environ["BULLPEN_TEST_REDIS_URL"] = server.url
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL, its db flushed before the test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A decoding client on the flushed test server."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def qname() -> str:
    """A fresh queue name per test."""
    return f"q{uuid.uuid4().hex[:10]}"


@pytest.fixture
def q(redis_url: str, qname: str) -> Iterator[Queue]:
    """A sync Queue named `qname` on the flushed session server (the API and
    dashboard conftests point Django at the same server)."""
    queue = Queue(qname, redis_url)
    yield queue
    queue.close()
