"""Static files come from the app itself (WhiteNoise, dashboard/staticfiles.py):
at their plain names until `collectstatic` has run (the checkout, the tests),
then pages refer to hashed names, served gzipped and cached for good."""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.test import Client

STATIC = Path(__file__).resolve().parents[2] / "dashboard" / "console" / "static"


def _stylesheet(page: str) -> str:
    found = re.search(r'<link rel="stylesheet" href="([^"]+)"', page)
    assert found, page
    return found[1]


def test_uncollected_files_are_served_at_their_plain_names(
    dashboard_redis: str,
) -> None:
    """Without STATIC_ROOT the page names the plain file, which WhiteNoise
    serves from the package with a short cache; the CSP is unchanged."""
    login = Client().get("/login/")
    assert "script-src 'self'" in login["Content-Security-Policy"]
    href = _stylesheet(login.content.decode())
    assert href == "/static/dashboard/dashboard.css"
    response = Client().get(href)
    assert response.status_code == 200
    assert response["Cache-Control"] == "max-age=60, public"
    body = b"".join(response.streaming_content)  # type: ignore[attr-defined]
    assert body == (STATIC / "dashboard" / "dashboard.css").read_bytes()


def test_collected_files_are_hashed_compressed_and_cached_for_good(
    dashboard_redis: str, settings: Any, tmp_path: Path
) -> None:
    """After collectstatic the page refers to `dashboard.<hash>.css`, served
    gzipped to a client that accepts it, immutable for a year; a script the
    page loads is hashed too."""
    settings.STATIC_ROOT = str(tmp_path / "static")
    call_command("collectstatic", "--noinput", verbosity=0)
    page = Client().get("/login/").content.decode()
    href = _stylesheet(page)
    assert re.fullmatch(r"/static/dashboard/dashboard\.[0-9a-f]{12}\.css", href)
    assert re.search(r'src="/static/vendor/htmx\.min\.[0-9a-f]{12}\.js"', page)
    response = Client().get(href, HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert response["Cache-Control"] == "max-age=315360000, public, immutable"
    body = b"".join(response.streaming_content)  # type: ignore[attr-defined]
    assert (
        gzip.decompress(body) == (STATIC / "dashboard" / "dashboard.css").read_bytes()
    )
