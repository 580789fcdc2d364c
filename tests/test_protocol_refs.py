"""Code comments cite the Redis protocol notes as `docs/protocol.md §N.N`:
every section they cite exists there, under that number."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITE = re.compile(r"docs/protocol\.md §(\d+(?:\.\d+)?)")
HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.MULTILINE)


def _citations() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for folder in ("queues", "gpu_workers", "dashboard", "tests"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".lua") or "node_modules" in path.parts:
                continue
            for number in CITE.findall(path.read_text(encoding="utf-8")):
                found.setdefault(number, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_cited_protocol_section_exists() -> None:
    sections = set(HEADING.findall((ROOT / "docs" / "protocol.md").read_text()))
    cited = _citations()
    assert len(cited) > 20, "the protocol citations were not found"
    missing = {n: files for n, files in cited.items() if n not in sections}
    assert not missing, f"sections cited but not in docs/protocol.md: {missing}"


def test_no_comment_cites_the_old_wire_spec() -> None:
    old = re.compile(r"\bwire spec\b")
    stale = [
        str(path.relative_to(ROOT))
        for folder in ("queues", "gpu_workers", "dashboard", "tests")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".lua")
        and "node_modules" not in path.parts
        and path.name != "test_protocol_refs.py"
        and old.search(path.read_text(encoding="utf-8"))
    ]
    assert not stale, f"cite docs/protocol.md §N.N instead: {stale}"
