"""Callers get precise types: mypy --strict accepts correct use of Queue,
AsyncQueue and Job (typing/caller_ok.py) and reports each mistake in
typing/caller_bad.py on the line marked `# E:`, and nowhere else."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CASES = Path(__file__).resolve().parent / "typing"


def _mypy(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(CASES / name)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_correct_use_type_checks() -> None:
    """caller_ok.py passes mypy --strict."""
    result = _mypy("caller_ok.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_mistake_is_reported_on_its_line() -> None:
    """mypy --strict reports errors in caller_bad.py exactly on the `# E:` lines."""
    result = _mypy("caller_bad.py")
    lines = (CASES / "caller_bad.py").read_text().splitlines()
    expected = {n for n, line in enumerate(lines, 1) if "# E:" in line}
    reported = {
        int(m.group(1))
        for m in re.finditer(r"caller_bad\.py:(\d+): error:", result.stdout)
    }
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected, "caller_bad.py marks no line with # E:"
    assert reported == expected, result.stdout
