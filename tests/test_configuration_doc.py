"""docs/configuration.md names every environment variable the code reads,
and documents gpu_workers/settings.py's table, row for row, with its
defaults."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dashboard", "gpu_workers", "queues")
ENVIRON_READS = ("get", "setdefault", "pop")


def _is_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def variables_read() -> dict[str, str]:
    """{variable: file} for every os.environ.get / os.environ[...] / os.getenv call
    with a literal name in the three packages, and every row of the table."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                name = None
                if isinstance(node, ast.Call) and node.args:
                    func = node.func
                    is_get = isinstance(func, ast.Attribute) and (
                        (func.attr in ENVIRON_READS and _is_environ(func.value))
                        or (
                            func.attr == "getenv"
                            and isinstance(func.value, ast.Name)
                            and func.value.id == "os"
                        )
                    )
                    if is_get and isinstance(node.args[0], ast.Constant):
                        name = node.args[0].value
                elif isinstance(node, ast.Subscript) and _is_environ(node.value):
                    if isinstance(node.slice, ast.Constant):
                        name = node.slice.value
                if isinstance(name, str) and name != "DJANGO_SETTINGS_MODULE":
                    found.setdefault(name, str(path.relative_to(ROOT)))
    # Most are read through the table (dashboard/settings.py, envconfig.py).
    from gpu_workers.settings import ROWS

    for row in ROWS:
        found.setdefault(row.name, "gpu_workers/settings.py")
    return found


def test_configuration_doc_names_every_variable_the_code_reads() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", text))
    read = variables_read()
    assert len(read) > 30, read  # the scan itself works
    missing = {name: where for name, where in read.items() if name not in documented}
    assert not missing, f"docs/configuration.md lacks a row for: {missing}"


#: Sections of docs/configuration.md whose variables the packages never read
#: (the image build script, the test suite): not rows of the table.
OUTSIDE_THE_TABLE = ("## Building the images", "## Test runs")


def _split_top(cell: str) -> list[str]:
    """A cell split at the commas outside parentheses and backticks."""
    parts, depth, quoted, current = [], 0, False, ""
    for i, char in enumerate(cell):
        if char == "`":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif char == "," and not quoted and depth == 0 and cell[i + 1 : i + 2] == " ":
            parts.append(current.strip())
            current = ""
            continue
        current += char
    return [*parts, current.strip()]


def documented_defaults() -> dict[str, tuple[str, str]]:
    """{variable: (section, its default as the docs write it)} of every table
    row of docs/configuration.md."""
    found: dict[str, tuple[str, str]] = {}
    section = ""
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        if line.startswith("## "):
            section = line
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])
        defaults = _split_top(cells[1]) if len(names) > 1 else [cells[1]]
        assert len(defaults) == len(names), line
        for name, default in zip(names, defaults):
            found[name] = (section, default)
    return found


def test_configuration_doc_is_the_table() -> None:
    """Every row of gpu_workers/settings.py's table is documented with the
    same default (a remark in parentheses may follow it), and nothing is
    documented that is not in the table (but for the image build's and the
    test suite's own variables)."""
    from gpu_workers.settings import ROWS

    documented = documented_defaults()
    rows = {row.name: row for row in ROWS}
    missing = sorted(set(rows) - set(documented))
    assert not missing, f"docs/configuration.md lacks a row for: {missing}"
    extra = sorted(
        name
        for name, (section, _) in documented.items()
        if name not in rows and not section.startswith(OUTSIDE_THE_TABLE)
    )
    assert not extra, f"documented but not in gpu_workers/settings.py: {extra}"
    wrong = {
        name: (default, rows[name].shown_default)
        for name, (_, default) in documented.items()
        if name in rows
        and default != rows[name].shown_default
        and not default.startswith(rows[name].shown_default + " (")
    }
    assert not wrong, f"documented default != the table's: {wrong}"
    outside = sorted(
        name
        for name, (section, _) in documented.items()
        if section.startswith(OUTSIDE_THE_TABLE) and name in rows
    )
    assert not outside, outside
