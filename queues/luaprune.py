"""Dropping the helpers a Lua script never calls, once its includes are
inlined (scripts.py).

Why: Redis runs a script's whole body on every call, so each top-level
`local function` is a closure made anew per call -- about a thousand
instructions each on Redis 7.0, whether it runs or not -- and the includes
bring every helper of a topic (move_to_finished inlines 94, of which 80 are
reachable). No Lua parser is at hand in Redis's dialect, so this reads the
house layout of `queues/lua` (a helper starts with `local function NAME` at
column 0 and ends at the next line that starts with `end`, or on its own
line when that balances) and keeps the text unchanged whenever it does not
fit it: a helper is dropped only when no code outside dead helpers names it.
"""

from __future__ import annotations

import re

_DEF = re.compile(r"^local function ([A-Za-z_]\w*)")
#: A quoted Lua string on one line.
STRING = r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"
# Comments and quoted strings: their words name nothing.
_NOISE = re.compile(r"--\[\[.*?\]\]|--[^\n]*|" + STRING, re.S)
_WORD = re.compile(r"(?<![.:\w])([A-Za-z_]\w*)")
_OPENERS = re.compile(r"\b(?:function|if|do)\b")
_END = re.compile(r"\bend\b")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(_NOISE.sub(" ", text)))


def helper_blocks(text: str) -> list[tuple[str | None, str]] | None:
    """(helper name or None, text) pieces in order; None: not the layout."""
    blocks: list[tuple[str | None, list[str]]] = []
    current: str | None = None
    for line in text.split("\n"):
        if current is not None:
            if _DEF.match(line):
                return None  # a helper inside a helper: not the layout
            blocks[-1][1].append(line)
            if line.startswith("end"):
                current = None
            continue
        found = _DEF.match(line)
        if found:
            blocks.append((found.group(1), [line]))
            code = _NOISE.sub(" ", line)
            if len(_OPENERS.findall(code)) != len(_END.findall(code)):
                current = found.group(1)
            continue
        if blocks and blocks[-1][0] is None:
            blocks[-1][1].append(line)
        else:
            blocks.append((None, [line]))
    if current is not None:
        return None  # a helper that never ends
    return [(name, "\n".join(lines)) for name, lines in blocks]


def drop_unused_helpers(text: str) -> str:
    """`text` without the top-level helpers nothing live calls."""
    blocks = helper_blocks(text)
    if blocks is None:
        return text
    names = {name for name, _ in blocks if name is not None}
    calls: dict[str, set[str]] = {}
    live_words: set[str] = set()
    for name, body in blocks:
        if name is None:
            live_words |= _words(body)
        else:
            own = body.split("\n", 1)
            rest = own[1] if len(own) > 1 else ""
            head = _DEF.sub("", own[0])
            calls.setdefault(name, set()).update(_words(head + "\n" + rest) & names)
    live: set[str] = set()
    todo = [n for n in names if n in live_words]
    while todo:
        name = todo.pop()
        if name not in live:
            live.add(name)
            todo.extend(calls[name] - live)
    return "\n".join(body for name, body in blocks if name is None or name in live)
