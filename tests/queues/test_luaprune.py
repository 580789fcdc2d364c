"""Helpers a script never calls are left out of what Redis runs
(queues/luaprune.py): every script of the four Lua directories keeps the
layout the pruning reads, loses only helpers nothing live names, and still
compiles in Redis."""

from __future__ import annotations

import re

import pytest
import redis

from dashboard.api import scripts as api_scripts
from dashboard.console import login_throttle
from gpu_workers import gputime
from queues import scripts as queue_scripts
from queues.luaprune import drop_unused_helpers, helper_blocks
from queues.scripts import LuaDir

DIRS = [queue_scripts.QUEUE_LUA, gputime.LUA, api_scripts.LUA, login_throttle._LUA]
SCRIPTS = [(d, n) for d in DIRS for n in d.names]
DEF = re.compile(r"^local function (\w+)", re.M)

TEXT = """local rcall = redis.call
local function used(x) return helper(x) + 1 end
local function helper(x)
  if x then
    return 2 * x
  end
  return 0
end
local function deadOnly()
  return helper(1)
end
local function dead()
  -- used(1) in a comment names nothing
  return deadOnly() .. "used"
end
local function onlyInString()
  return 1
end
return rcall("SET", KEYS[1], used(1), "onlyInString")
"""


def test_dead_helpers_and_what_only_they_call_go() -> None:
    out = drop_unused_helpers(TEXT)
    assert DEF.findall(out) == ["used", "helper"]
    assert out.endswith('return rcall("SET", KEYS[1], used(1), "onlyInString")\n')
    assert "local rcall = redis.call" in out


@pytest.mark.parametrize(
    "text",
    [
        "local function f()\n  return 1\n",  # never ends
        "local function f()\nlocal function g() end\nend\nreturn 1\n",  # nested
    ],
)
def test_text_outside_the_layout_is_kept_whole(text: str) -> None:
    assert drop_unused_helpers(text) == text


@pytest.mark.parametrize(("lua", "name"), SCRIPTS, ids=[n for _, n in SCRIPTS])
def test_every_script_keeps_the_layout_and_compiles(
    r: redis.Redis, lua: LuaDir, name: str
) -> None:
    """The inlined text is the layout (so pruning applies), no helper left
    out is named by what stays, and Redis compiles what stays."""
    kept = lua.source(name)
    inlined = helper_blocks(kept)
    assert inlined is not None, f"{name}: not the layout luaprune reads"
    gone = set(DEF.findall(lua.inlined(name))) - set(DEF.findall(kept))
    for helper in gone:
        assert not re.search(rf"(?<![.:\w]){helper}\b", _code(kept)), helper
    sha = r.script_load(kept)
    assert r.script_exists(sha) == [True]


def test_the_hot_finish_loses_helpers() -> None:
    """move_to_finished runs with fewer closures than it inlines."""
    expanded = queue_scripts.QUEUE_LUA.inlined("move_to_finished")
    kept = queue_scripts.source("move_to_finished")
    assert len(DEF.findall(kept)) < len(DEF.findall(expanded))


def _code(text: str) -> str:
    """Text without comments and strings."""
    return re.sub(
        r"--\[\[.*?\]\]|--[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'",
        " ",
        text,
        flags=re.S,
    )
