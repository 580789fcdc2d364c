"""docs/deploy.md's shell commands, read the way a reader copies them: every
line of a ```sh block (continuations joined), by numbered section, split
into leading VAR=value assignments and an argv."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


@dataclass
class Command:
    """One command of the doc: its section, its text, env and argv."""

    section: str
    text: str
    env: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)


def _lines(block: str) -> list[str]:
    joined, current = [], ""
    for raw in block.splitlines():
        line = raw.strip()
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current and not current.startswith("#"):
            joined.append(current)
        current = ""
    return joined


def commands(text: str | None = None) -> list[Command]:
    """Every command of the doc's ```sh blocks, in order."""
    text = DOC.read_text() if text is None else text
    found = []
    section = ""
    for part in re.split(r"(^[ \t]*```sh\n.*?^[ \t]*```$)", text, flags=re.M | re.S):
        if part.lstrip().startswith("```sh"):
            body = "\n".join(part.splitlines()[1:-1])
            for line in _lines(body):
                words = shlex.split(line)
                env = {}
                while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                    name, _, value = words.pop(0).partition("=")
                    env[name] = value
                found.append(Command(section, line, env, words))
        else:
            headings = re.findall(r"^## (.+)$", part, flags=re.M)
            if headings:
                section = headings[-1]
    return found


def section(title_start: str) -> list[Command]:
    """The commands of the section whose title starts with `title_start`."""
    got = [c for c in commands() if c.section.startswith(title_start)]
    assert got, f"docs/deploy.md has no commands under '## {title_start}'"
    return got
