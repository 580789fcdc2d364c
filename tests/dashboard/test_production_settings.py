"""Production is the default: DEBUG off, a secret key required (with a
one-line error saying how to set it), `check --deploy` clean with the
documented production variables, password validators on, and a
Content-Security-Policy on every page."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client

from dashboard.run import secret_key_beside

ROOT = Path(__file__).resolve().parents[2]

#: The production variables: what docs/deploy.md (section 3) and
#: docs/operations.md ("Running in production") set.
PRODUCTION = {
    "DJANGO_ALLOWED_HOSTS": "bullpen.example.com",
    "DJANGO_SECURE_COOKIES": "1",
    "DJANGO_SECURE_SSL_REDIRECT": "1",
    "DJANGO_SECURE_HSTS_SECONDS": "31536000",
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "DJANGO_SECURE_HSTS_PRELOAD": "1",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "1",
}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`manage.py <args>` with dashboard.settings and only the DJANGO_* and
    BULLPEN_* variables given here (none inherited from the test run)."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "BULLPEN_"))
    }
    clean.update(DJANGO_SETTINGS_MODULE="dashboard.settings", **env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_no_start_without_a_secret_key_and_one_line_says_how() -> None:
    """Without DJANGO_SECRET_KEY nothing starts; the error is one line that
    names the variable and how to make a value (no traceback)."""
    result = manage("check")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("DJANGO_SECRET_KEY is not set")
    assert "secrets.token_urlsafe" in lines[0]


def test_debug_is_off_unless_asked_for() -> None:
    """DEBUG is False by default and True only with DJANGO_DEBUG=1."""
    show = ["shell", "-c", "from django.conf import settings; print(settings.DEBUG)"]
    key = secrets.token_urlsafe(50)
    assert manage(*show, DJANGO_SECRET_KEY=key).stdout.split()[-1] == "False"
    asked = manage(*show, DJANGO_SECRET_KEY=key, DJANGO_DEBUG="1")
    assert asked.stdout.split()[-1] == "True"


def test_check_deploy_is_clean_with_the_production_variables() -> None:
    """`check --deploy` fails on the local defaults (plain-HTTP cookies, no
    HSTS) and is clean once the documented production variables are set."""
    key = secrets.token_urlsafe(50)
    local = manage(
        "check", "--deploy", "--fail-level", "WARNING", DJANGO_SECRET_KEY=key
    )
    assert local.returncode != 0 and "security.W012" in local.stderr
    prod = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECRET_KEY=key,
        **PRODUCTION,
    )
    assert prod.returncode == 0, prod.stderr
    assert "no issues" in prod.stdout


@pytest.mark.parametrize("password", ["short", "password123", "12345678901234"])
def test_django_password_validators_refuse_weak_passwords(
    db: None, password: str
) -> None:
    """Too short, common or all-digit passwords are refused."""
    with pytest.raises(ValidationError):
        validate_password(password)
    validate_password(secrets.token_urlsafe(16))


def test_every_page_has_a_strict_content_security_policy(
    dashboard_redis: str, admin_client: Client
) -> None:
    """Pages and the login page carry a CSP that allows scripts only from
    our own files (no inline scripts, no eval)."""
    for url in ("/", "/gpus/", "/login/"):
        policy = admin_client.get(url)["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'"
        assert directives["style-src"] == "'self'"
        assert "unsafe-eval" not in policy and "unsafe-inline" not in policy
        assert directives["frame-ancestors"] == "'none'"


def test_make_run_keeps_one_secret_key_beside_its_database(tmp_path: Path) -> None:
    """make run's key is made once, readable by its owner only, and the same
    on the next start (sessions and tickets survive a restart)."""
    db = tmp_path / "var" / "db.sqlite3"
    first = secret_key_beside(db)
    path = tmp_path / "var" / "secret_key"
    assert len(first) >= 50 and path.read_text().strip() == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert secret_key_beside(db) == first
