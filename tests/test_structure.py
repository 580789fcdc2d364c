"""The import rule holds (docs/architecture.md): layers, the parts of
dashboard/ (the site above its two independent apps above their shared leaf),
and no import cycle between modules.

The contracts live in pyproject.toml under `[tool.importlinter]`; the cycle check
is ours because it must see every import statement, function-level and
`if TYPE_CHECKING:` ones included: an import moved into a function or behind
TYPE_CHECKING to dodge a cycle still is one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("queues", "gpu_workers", "dashboard")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_import_contracts_hold() -> None:
    """lint-imports keeps every contract: dashboard > gpu_workers > queues, no
    Django below dashboard, dashboard.api uses only dashboard.shared.redis/redaction."""
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def import_graph() -> grimp.ImportGraph:
    """Every import between modules of the three packages, wherever it is written."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return grimp.build_graph(
        *PACKAGES, exclude_type_checking_imports=False, cache_dir=None
    )


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The groups of modules that import each other, round and round (Tarjan's
    strongly connected components with more than one module, or a module
    importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1 or graph.direct_import_exists(
                importer=module, imported=module
            ):
                found.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph.modules)))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def describe(graph: grimp.ImportGraph, group: list[str]) -> str:
    """One concrete loop through `group`, each step with its line numbers."""
    start = group[0]
    members = set(group)
    first = min(members & graph.find_modules_directly_imported_by(start))
    if first == start:  # a module importing itself
        loop = [start, start]
    else:
        back = graph.find_shortest_chain(importer=first, imported=start) or (start,)
        loop = [start, *back]
    steps = []
    for importer, imported in zip(loop, loop[1:]):
        lines = sorted(
            detail["line_number"]
            for detail in graph.get_import_details(importer=importer, imported=imported)
        )
        steps.append(f"  {importer} -> {imported} (l.{', l.'.join(map(str, lines))})")
    return f"cycle among {', '.join(group)}:\n" + "\n".join(steps)


def test_no_import_cycles() -> None:
    """No module imports itself back through others, even from inside a function."""
    graph = import_graph()
    assert len(graph.modules) > 100  # the scan itself works
    found = cycles(graph)
    assert not found, "\n\n".join(describe(graph, group) for group in found)


#: Packages whose sub-packages are drawn as boxes: the three, and the parts
#: of dashboard/ (its two apps and their shared leaf).
CONTAINERS = ("queues", "gpu_workers", "dashboard") + (
    "dashboard.console",
    "dashboard.api",
    "dashboard.shared",
)


def folder_of(module: str) -> str:
    """The box a module is drawn in: its sub-package under a container
    (`dashboard.console.live`, `queues.ops`, `gpu_workers.probe`), or the
    module itself when it sits at a container's top (`dashboard.shared.conf`,
    `queues.job`, `dashboard.console.metrics`)."""
    parts = module.split(".")
    for depth in (2, 1):
        if ".".join(parts[:depth]) in CONTAINERS and len(parts) > depth:
            head = parts[: depth + 1]
            is_box = len(parts) > depth + 1 or (ROOT / Path(*head)).is_dir()
            return ".".join(head) if is_box else module
    return module


def test_no_cycles_between_folders() -> None:
    """The drawing of imports between packages, folders and top-level modules
    has no cycle either: a folder never imports a module that imports it back
    (say dashboard.shared.conf taking a default from dashboard.console.live
    while live reads conf)."""
    graph = import_graph()
    boxes = grimp.ImportGraph()
    for module in graph.modules:
        boxes.add_module(folder_of(module))
        for imported in graph.find_modules_directly_imported_by(module):
            if folder_of(imported) != folder_of(module):
                boxes.add_import(
                    importer=folder_of(module), imported=folder_of(imported)
                )
    assert len(boxes.modules) > 40
    found = cycles(boxes)
    assert not found, "\n".join(" <-> ".join(group) for group in found)


# --- the parts of dashboard/ (issue 23) ---------------------------------------
#: The parts of dashboard/ besides the standalone site's top-level modules.
PARTS = {"console", "api", "shared"}


def contracts() -> dict[str, dict[str, Any]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        found = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    return {c["id"]: c for c in found}


def test_every_top_level_module_of_dashboard_is_the_sites() -> None:
    """dashboard/ holds the site's modules and the three parts, nothing else;
    every site module is forbidden to the shared leaf and to both apps (a new
    one left out of the list would escape both contracts)."""
    top = ROOT / "dashboard"
    folders = {p.name for p in top.iterdir() if (p / "__init__.py").exists()}
    assert folders == PARTS
    site = {f"dashboard.{p.stem}" for p in top.glob("*.py") if p.stem != "__init__"}
    assert "dashboard.settings" in site and "dashboard.asgi" in site
    by_id = contracts()
    for contract in ("shared-is-a-leaf", "apps-below-the-site"):
        forbidden = set(by_id[contract]["forbidden_modules"])
        assert site <= forbidden, (contract, sorted(site - forbidden))


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three packages and pyproject.toml, copied (Python files only)."""
    copy = tmp_path_factory.mktemp("tree")
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package,
            copy / package,
            ignore=lambda d, names: [
                n
                for n in names
                if not (n.endswith(".py") or (Path(d) / n).is_dir())
                or n == "__pycache__"
            ],
        )
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


@pytest.mark.parametrize(
    ("part", "imported", "contract"),
    [
        ("console", "dashboard.api.models", "apps-independent"),
        ("api", "dashboard.console.audit", "apps-independent"),
        ("shared", "dashboard.console.views", "shared-is-a-leaf"),
        ("shared", "dashboard.api.keys", "shared-is-a-leaf"),
        ("shared", "dashboard.settings", "shared-is-a-leaf"),
        ("console", "dashboard.urls", "apps-below-the-site"),
        ("api", "dashboard.run", "apps-below-the-site"),
    ],
)
def test_a_violation_put_back_breaks_its_contract(
    tree_copy: Path, part: str, imported: str, contract: str
) -> None:
    """Each of the contracts above fails on an import that breaks it, in a
    copy of the tree; and the copy without it keeps the contract."""
    command = [str(LINT_IMPORTS), "--no-cache", "--no-logo", "--contract", contract]
    clean = subprocess.run(
        command, cwd=tree_copy, capture_output=True, text=True, timeout=120
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    violation = tree_copy / "dashboard" / part / "put_back.py"
    violation.write_text(f'"""A violation."""\n\nimport {imported}  # noqa: F401\n')
    try:
        broken = subprocess.run(
            command, cwd=tree_copy, capture_output=True, text=True, timeout=120
        )
    finally:
        violation.unlink()
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "BROKEN" in broken.stdout and f"dashboard.{part}.put_back" in broken.stdout
