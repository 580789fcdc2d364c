"""House style holds: ruff is clean (packages, tests, benches) and mypy strict
passes on the three packages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What ruff and mypy --strict check: the two libraries and the Django project.
PACKAGES = ["queues", "gpu_workers", "dashboard"]
#: What ruff checks besides (mypy --strict does not: tests and benches).
SCRIPTS = ["tests", "bench"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ruff_is_clean() -> None:
    """ruff finds nothing in the packages, tests and benches (rules in
    pyproject.toml)."""
    result = _run("ruff", "check", *PACKAGES, *SCRIPTS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_passes() -> None:
    """mypy --strict (pyproject.toml, with django-stubs) passes on the packages."""
    result = _run("mypy", *PACKAGES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_libraries_never_import_django_or_dashboard() -> None:
    """Imports point one way: queues <- gpu_workers <- dashboard."""
    offenders = []
    for package, forbidden in (
        ("queues", ("django", "dashboard", "gpu_workers")),
        ("gpu_workers", ("django", "dashboard")),
    ):
        for path in (ROOT / package).rglob("*.py"):
            for line in path.read_text().splitlines():
                stripped = line.strip()
                for name in forbidden:
                    if stripped.startswith((f"import {name}", f"from {name}")):
                        offenders.append(f"{path.relative_to(ROOT)}: {stripped}")
    assert offenders == []


def test_queue_core_reads_no_environment() -> None:
    """queues/ takes constructor arguments only; the CLI's main() is the exception."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "queues").rglob("*.py")
        if path.name != "cli.py" and "os.environ" in path.read_text()
    ]
    assert offenders == []
