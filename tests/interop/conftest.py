"""Interop tests run against real Node.js BullMQ (version pinned in
package.json). Without `node` they are skipped with a loud reason; with node
but without node_modules, the pinned packages are installed first (as `make
node-deps` does)."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import LIVE

HERE = Path(__file__).resolve().parent
NODE_MISSING = (
    "NODE.JS NOT FOUND: the BullMQ interop tests (tests/interop) need `node` on PATH "
    "and were NOT run; Bullpen's compatibility with Node BullMQ is unverified here"
)


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Skip every interop test, loudly, when there is no node binary."""
    if shutil.which("node"):
        return
    warnings.warn(NODE_MISSING, stacklevel=1)
    marker = pytest.mark.skip(reason=NODE_MISSING)
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(marker)


@pytest.fixture(scope="session", autouse=True)
def node_modules() -> None:
    """Install the pinned BullMQ when node is here but the packages are not."""
    if not shutil.which("node") or (HERE / "node_modules" / "bullmq").is_dir():
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            "node is installed but npm is not: cannot install BullMQ for "
            "tests/interop (run `make node-deps` where npm is available)"
        )
    for argv in (
        [npm, "ci", "--no-audit", "--no-fund"],
        [npm, "install", "--no-audit", "--no-fund"],
    ):
        if (
            subprocess.run(argv, cwd=HERE, capture_output=True, timeout=300).returncode
            == 0
        ):
            return
    pytest.fail("`npm ci` in tests/interop failed: BullMQ could not be installed")


@pytest.fixture(autouse=True)
def no_stray_processes() -> Iterator[None]:
    """SIGKILL any Node or Python process a test left running (a failed wait)."""
    yield
    while LIVE:
        LIVE.pop().kill()
