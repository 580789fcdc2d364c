"""DATABASE_URL parsing (dashboard/dburl.py) and its system check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.dburl import parse_database_url, redact

BASE = Path("/srv/bullpen")
ROOT = Path(__file__).resolve().parent.parent.parent


def test_postgres_url_with_everything() -> None:
    db = parse_database_url(
        "postgres://bull%40pen:p%3Aw%2Fd@db.example:6543/bullpen"
        "?sslmode=verify-full&connect_timeout=5&application_name=dash",
        BASE,
        conn_max_age=30,
    )
    assert db == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "bullpen",
        "USER": "bull@pen",
        "PASSWORD": "p:w/d",
        "HOST": "db.example",
        "PORT": "6543",
        "OPTIONS": {
            "sslmode": "verify-full",
            "connect_timeout": 5,
            "application_name": "dash",
        },
        "CONN_MAX_AGE": 30,
        "CONN_HEALTH_CHECKS": True,
    }


def test_postgresql_scheme_and_defaults() -> None:
    db = parse_database_url("postgresql://127.0.0.1/bp", BASE)
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "bp",
        "",
        "",
        "127.0.0.1",
        "",
    )
    assert db["OPTIONS"] == {}
    assert db["CONN_MAX_AGE"] == 60


def test_postgres_without_host_uses_the_local_socket() -> None:
    db = parse_database_url("postgres:///bp", BASE)
    assert (db["HOST"], db["NAME"]) == ("", "bp")


def test_ipv6_host() -> None:
    db = parse_database_url("postgres://u@[::1]:5432/bp", BASE)
    assert (db["HOST"], db["PORT"]) == ("::1", "5432")


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("sqlite:////var/lib/bullpen/db.sqlite3", "/var/lib/bullpen/db.sqlite3"),
        ("sqlite:///db.sqlite3", "/srv/bullpen/db.sqlite3"),
        ("sqlite:///var/db.sqlite3", "/srv/bullpen/var/db.sqlite3"),
    ],
)
def test_sqlite_paths(url: str, name: str) -> None:
    assert parse_database_url(url, BASE) == {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": name,
    }


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "is not a postgres://"),
        ("db.sqlite3", "is not a postgres://"),
        ("mysql://u:hunter2@h/db", "is not a postgres://"),
        ("postgres://u:hunter2@h:5432", "names no database"),
        ("postgres://u:hunter2@h:5432/", "names no database"),
        ("postgres://u:hunter2@h:5432/a/b", "names no database"),
        ("postgres://u:hunter2@h:99999/db", "bad host or port"),
        ("postgres://u:hunter2@h:port/db", "bad host or port"),
        ("postgres://u:hunter2@h/db?sslmode=maybe", "sslmode 'maybe'"),
        ("postgres://u:hunter2@h/db?connect_timeout=-1", "connect_timeout '-1'"),
        ("postgres://u:hunter2@h/db?connect_timeout=soon", "connect_timeout"),
        ("postgres://u:hunter2@h/db?sslmode=require&sslmode=disable", "twice"),
        ("postgres://u:hunter2@h/db?password=x", "unknown parameter 'password'"),
        ("postgres://u:hunter2@h/db#frag", "fragment"),
        ("sqlite://host/db.sqlite3", "takes no host"),
        ("sqlite:///", "names no SQLite file"),
        ("sqlite:///dir/", "names no SQLite file"),
        ("sqlite:///db.sqlite3?mode=ro", "takes no parameters"),
        # dj-database-url would take these: blank values dropped, any
        # parameter passed on, sqlite:// an in-memory database.
        ("postgres://u:hunter2@h/db?sslmode=", "sslmode ''"),
        ("postgres://u:hunter2@h/db?application_name=&application_name=a", "twice"),
        ("postgres://u:hunter2@h/db?currentSchema=x", "unknown parameter"),
        ("sqlite://", "takes no host"),
        ("sqlite://:memory:", "takes no host"),
    ],
)
def test_bad_urls_say_why_without_the_password(url: str, says: str) -> None:
    with pytest.raises(ValueError, match="DATABASE_URL") as info:
        parse_database_url(url, BASE)
    assert says in str(info.value)
    assert "hunter2" not in str(info.value)


def test_values_stay_as_written() -> None:
    """What dj-database-url, which does the parsing, would change: port 0
    read as none, "123" and "true" turned into 123 and True, a blank value
    dropped; and a DISABLE_SERVER_SIDE_CURSORS key added."""
    db = parse_database_url("postgres://h:0/db?application_name=123", BASE)
    assert (db["PORT"], db["OPTIONS"]) == ("0", {"application_name": "123"})
    assert "DISABLE_SERVER_SIDE_CURSORS" not in db
    for value in ("true", ""):
        db = parse_database_url(f"postgres://h/db?application_name={value}", BASE)
        assert db["OPTIONS"] == {"application_name": value}


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgres://u:hunter2@h/db", "postgres://u:***@h/db"),
        ("postgres://u:hun@ter2@h/db?x=1", "postgres://u:***@h/db?x=1"),
        ("postgres://u@h/db", "postgres://u@h/db"),
        ("sqlite:///a:b@c", "sqlite:///a:b@c"),
    ],
)
def test_redact(url: str, shown: str) -> None:
    assert redact(url) == shown


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # The DATABASE_URL given is what is tested: without the PostgreSQL run's
    # switch, which would put the run's test database in its place.
    inherited = {k: v for k, v in os.environ.items() if k != "BULLPEN_TEST_DATABASE"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**inherited, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_bad_url_stops_migrate_with_one_check_error(tmp_path: Path) -> None:
    """`make run` migrates first: a bad DATABASE_URL stops it there, with
    bullpen.E009 naming the URL (password hidden) and nothing else wrong."""
    done = _manage("migrate", DATABASE_URL="postgres://u:hunter2@h:5432")
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if "(bullpen.E" in line]
    assert errors == [
        "?: (bullpen.E009) DATABASE_URL 'postgres://u:***@h:5432' names no "
        "database: postgres://user@host:5432/name"
    ]
    assert "hunter2" not in done.stdout + done.stderr


def test_a_sqlite_url_is_used(tmp_path: Path) -> None:
    db = tmp_path / "via-url.sqlite3"
    done = _manage("migrate", "-v", "0", DATABASE_URL=f"sqlite:///{db}")
    assert done.returncode == 0, done.stderr
    assert db.stat().st_size > 0
