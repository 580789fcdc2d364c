"""A script as a Redis function library (Redis 7.0+), so that its helpers are
made once, when the library loads, instead of on every call.

Why: EVALSHA runs a script's whole chunk on every call, and each helper an
include brings is a closure made anew each time: on Redis 7.0.15 that was
133k of the 475k instructions a worker's finish-and-claim cost per job at
concurrency 1 (bench/groups_instructions.py --chain), more than any command
it runs. A library registers one function whose body is the script's own
text; the helpers and the includes' constants stay at the library's top
level and become the function's upvalues.

Redis runs a library's top level in a bare environment (no `redis.call`,
`string`, `unpack`, `ipairs`), so the includes' top-level statements, all of
the form `local NAME = expr` in `queues/lua`'s layout, are split: `local
NAME` stays where it was (the same scoping) and `NAME = expr` runs at the
start of a call, in order, as the chunk ran them: on every call (a per-call
cache such as base.lua's `metaRead` starts empty each call), except a
constant, named in capitals and reading nothing of the call (no KEYS, ARGV,
redis), which is set on the library's first call and kept (23k of the 368k
instructions of a finish-and-claim went to re-making them). House style
never changes a capitalised name once set (tests/queues/test_luafunctions.py
checks every Lua directory). A script whose includes do not fit that layout
gets no library: it keeps going as EVALSHA (`build` returns None).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .luaprune import STRING, helper_blocks

_ASSIGN = re.compile(r"^local ([A-Za-z_]\w*) = (\S.*)$")
# A constant: named in capitals (house style: never changed once set).
_CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*$")
# What a value read per call names: then it is computed on every call.
_PER_CALL = re.compile(r"\b(?:KEYS|ARGV|redis|rcall)\b")
# A line's code without its comment (strings kept whole).
_CODE = re.compile(STRING + r"|--.*$|[^\"'-]+|-")


@dataclass(frozen=True)
class LuaFunction:
    """A script's library: `name` is both the library's and the function's
    (one per script text, so versions of Bullpen sharing a Redis never
    replace each other's), `text` what FUNCTION LOAD takes."""

    name: str
    text: str


def _code(line: str) -> str:
    """`line` without a trailing `--` comment."""
    out = []
    for piece in _CODE.findall(line):
        if piece.startswith("--"):
            break
        out.append(piece)
    return "".join(out).rstrip()


def _balanced(bare: str) -> bool:
    """Whether `bare` (code without its strings) closes every bracket it
    opens."""
    depth = 0
    for char in bare:
        depth += (char in "({[") - (char in ")}]")
        if depth < 0:
            return False
    return depth == 0


def _split_statements(text: str) -> tuple[list[str], list[str]] | None:
    """The top-level text between helpers as (what stays, what each call
    runs); None when a statement is not a one-line `local NAME = expr`."""
    stays: list[str] = []
    runs: list[str] = []
    in_comment = False
    for line in text.split("\n"):
        if in_comment:
            in_comment = "]]" not in line
            continue
        if line.startswith("--[["):
            in_comment = "]]" not in line
            continue
        code = _code(line)
        if not code:
            continue
        found = _ASSIGN.match(code)
        bare = re.sub(STRING, "", code)
        # One statement, whole on its line.
        if found is None or not _balanced(bare) or ";" in bare:
            return None
        name, value = found.groups()
        stays.append(f"local {name}")
        if _CONSTANT.match(name) and not _PER_CALL.search(bare):
            runs.append(f"if {name} == nil then {name} = {value} end")
        else:
            runs.append(f"{name} = {value}")
    return stays, runs


def build(script: str, head: str, body: str) -> LuaFunction | None:
    """The library of the script named `script` whose inlined (and pruned)
    includes are `head` and own text `body`; None when `head` does not fit
    the layout (see the module's doc)."""
    blocks = helper_blocks(head)
    if blocks is None:
        return None
    top: list[str] = []
    prologue: list[str] = []
    for name, text in blocks:
        if name is not None:
            top.append(text)
            continue
        split = _split_statements(text)
        if split is None:
            return None
        top.extend(split[0])
        prologue.extend(split[1])
    code = "\n".join(top) + "\0" + "\n".join(prologue) + "\0" + body
    digest = hashlib.sha1(code.encode("utf-8")).hexdigest()[:16]
    name = f"bullpen_{script}_{digest}"
    text = "\n".join(
        [
            f"#!lua name={name}",
            *top,
            f"redis.register_function('{name}', function(KEYS, ARGV)",
            *prologue,
            body,
            "end)",
            "",
        ]
    )
    return LuaFunction(name, text)
