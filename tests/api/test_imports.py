"""The API's imports: of the dashboard only the shared leaf (settings, the
Redis client) and redaction, and no cycle between its modules (a
function-level import counts)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What of the dashboard (outside the API) the API may import.
ALLOWED = {
    "dashboard.shared",
    "dashboard.shared.conf",
    "dashboard.shared.redis",
    "dashboard.redaction",
}


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the dashboard project."""
    found = {}
    for path in (ROOT / "dashboard").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, node: ast.AST) -> list[str]:
    """The dotted names an import statement names (`from x import y`: x.y)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        package = name.split(".")
        if path.name != "__init__.py":
            package.pop()
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([node.module] if node.module else []))
    return [f"{base}.{alias.name}" for alias in node.names]


def _edges() -> dict[str, set[str]]:
    """Module of dashboard/api -> the dashboard modules it imports, at any
    level, with the packages that importing them runs."""
    modules = _modules()
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        if not name.startswith("dashboard.api"):
            continue
        targets = edges.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _imported(name, path, node):
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]  # a name, not a module
                parts = target.split(".")
                for end in range(2, len(parts) + 1):
                    module = ".".join(parts[:end])
                    if module in modules and not (name + ".").startswith(module + "."):
                        targets.add(module)
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str]:
    """One import cycle among the modules, or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = 1
        path.append(module)
        for target in sorted(edges.get(module, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target in edges and target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[module] = 2
        return []

    for module in sorted(edges):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return []


def test_api_imports_only_shared_and_redaction_of_the_dashboard() -> None:
    """dashboard/api never reaches into the pages (read models, views, live)."""
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in _edges().items()
        for target in targets
        if not target.startswith("dashboard.api") and target not in ALLOWED
    )
    assert offenders == []


def test_api_modules_import_no_cycle() -> None:
    """No module of dashboard/api imports one that imports it back."""
    assert _cycle(_edges()) == []
