"""`python -m build` makes an sdist and, from it, the wheel; the wheel holds
the three packages with everything they read from disk (Lua scripts,
templates, static files, migrations; not .gitkeep), the standalone site's own
templates and static files, and nothing of tests, bench or examples."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.packaging.helpers import ROOT, copy_source

pytestmark = pytest.mark.slow


def test_python_m_build_makes_a_wheel_with_the_package_data(tmp_path: Path) -> None:
    """Each data file of the checkout's packages is in the wheel (built from
    the sdist), beside the console scripts; tests, bench and examples are not."""
    src = copy_source(tmp_path / "src")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("bullpen-*.whl")
    (sdist,) = (tmp_path / "dist").glob("bullpen-*.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {
        str(p.relative_to(ROOT))
        for package in ("queues", "gpu_workers", "dashboard")
        for p in (ROOT / package).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")
    }
    assert len(data) > 250 and data - names == set()
    assert any(n.startswith("dashboard/console/migrations/0001") for n in names)
    assert not [n for n in names if n.split("/")[0] in ("tests", "bench", "examples")]
    # The standalone site's own templates and static files (templates/ and
    # static/ beside manage.py) go to <prefix>/share/bullpen.
    site = {
        f"share/bullpen/{p.relative_to(ROOT)}"
        for folder in ("templates", "static")
        for p in (ROOT / folder).rglob("*")
        if p.is_file()
    }
    shipped = {n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n}
    assert "share/bullpen/templates/site/404.html" in site and site - shipped == set()
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "bullpen = dashboard.cli:main" in scripts
    assert "bullpen-worker = queues.cli:worker_main" in scripts
    with tarfile.open(sdist) as tar:
        assert not [n for n in tar.getnames() if "/tests/" in n or "/bench/" in n]
