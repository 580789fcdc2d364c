"""The import rule holds (docs/architecture.md): layers, the API's few page
imports, and no import cycle between modules.

The contracts live in pyproject.toml under `[tool.importlinter]`; the cycle check
is ours because it must see every import statement, function-level and
`if TYPE_CHECKING:` ones included: an import moved into a function or behind
TYPE_CHECKING to dodge a cycle still is one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("queues", "gpu_workers", "dashboard")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_import_contracts_hold() -> None:
    """lint-imports keeps every contract: dashboard > gpu_workers > queues, no
    Django below dashboard, dashboard.api uses only dashboard.shared/redaction."""
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


def folder_of(module: str) -> str:
    """The box a module is drawn in: its sub-package under a top package
    (`dashboard.live`, `queues.ops`, `gpu_workers.probe`), or the module itself
    when it sits at a package's top (`dashboard.conf`, `queues.job`)."""
    parts = module.split(".")
    head = ".".join(parts[:2])
    return head if len(parts) > 2 or (ROOT / Path(*parts[:2])).is_dir() else module


def test_no_cycles_between_folders() -> None:
    """The drawing of imports between packages, folders and top-level modules
    has no cycle either: a folder never imports a module that imports it back
    (say dashboard.conf taking a default from dashboard.live while live reads
    conf)."""
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
