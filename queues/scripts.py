"""The one loader of Bullpen's Lua scripts: `LuaDir` reads the `.lua` files of
any package directory and registers them per redis-py client (sync or
asyncio, single node or cluster); `Scripts` are BullMQ's, in `queues/lua/`.

A script may pull shared helpers from its directory's `includes/` with a line
`--- @include "name"`; each include is inlined once, in order, and the helpers
the script never calls are left out (luaprune.py). A registered
script is sent as EVALSHA and loaded again when Redis answers NOSCRIPT (after
a SCRIPT FLUSH, a restart, or on another node): redis-py's `register_script`.
gpu_workers (`gpu_workers/lua/`) and dashboard (`dashboard/console/lua/`,
`dashboard/api/lua/`) load theirs with it too.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .luafunctions import LuaFunction, build
from .luaprune import drop_unused_helpers

_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"\s*$', re.MULTILINE)
#: Where a script's own text starts, once its includes are inlined.
_BODY = "--- @body"
#: Clients whose registered scripts `LuaDir.on` keeps (the most recently used).
CLIENTS_KEPT = 64


class ScriptSet:
    """The scripts of one `LuaDir` registered on one client: one attribute
    per script, each called as `script(keys, args)` (`client=` a pipeline)."""

    def __init__(self, lua: LuaDir, client: Any) -> None:
        self.client = client
        #: The scripts' function libraries (LuaDir.function).
        self.function = lua.function
        for name in lua.names:
            setattr(self, name, client.register_script(lua.source(name)))

    def __getattr__(
        self, name: str
    ) -> Any:  # for type checkers: attributes are set above
        raise AttributeError(name)


class LuaDir:
    """The Lua scripts `names` in `directory` (`<name>.lua` each)."""

    def __init__(self, directory: Path, names: Iterable[str]) -> None:
        self.directory = directory
        self.names = tuple(names)
        self._sources: dict[str, str] = {}
        self._functions: dict[str, LuaFunction | None] = {}
        self._lock = threading.Lock()
        self._sets: OrderedDict[Any, ScriptSet] = OrderedDict()

    def _read(self, relative: str) -> str:
        return (self.directory / relative).read_text("utf-8")

    def inlined(self, name: str) -> str:
        """The text of a script with its includes inlined, each once."""
        return self._expand(self._own(name), set())

    def _own(self, name: str) -> str:
        if name not in self.names:
            raise KeyError(f"no script {name!r} in {self.directory}")
        return self._read(f"{name}.lua")

    def _expand(self, text: str, seen: set[str]) -> str:
        def include(match: re.Match[str]) -> str:
            inc = match.group(1)
            if inc in seen:
                return ""
            seen.add(inc)
            return self._expand(self._read(f"includes/{inc}.lua"), seen)

        return _INCLUDE.sub(include, text)

    def source(self, name: str) -> str:
        """What Redis runs: the inlined script without the helpers it never
        calls (read once)."""
        found = self._sources.get(name)
        if found is None:
            found = self._sources[name] = drop_unused_helpers(self.inlined(name))
        return found

    def function(self, name: str) -> LuaFunction | None:
        """The script as a function library (queues/luafunctions.py), or None
        when it has no includes or they do not fit the layout (made once)."""
        if name in self._functions:
            return self._functions[name]
        own = self._own(name)
        includes = list(_INCLUDE.finditer(own))
        found = None
        if includes:
            seen: set[str] = set()
            cut = includes[-1].end()
            text = drop_unused_helpers(
                self._expand(own[:cut], seen)
                + f"\n{_BODY}\n"
                + self._expand(own[cut:], seen)
            )
            head, _, body = text.partition(f"\n{_BODY}\n")
            found = build(name, head, body)
        self._functions[name] = found
        return found

    def register(self, client: Any) -> ScriptSet:
        """The scripts registered anew on `client`."""
        return ScriptSet(self, client)

    def on(self, client: Any) -> ScriptSet:
        """The scripts registered on `client`, once per client (the last
        `CLIENTS_KEPT` clients used are kept, so a long-lived client hashes
        its scripts once, not on every call)."""
        with self._lock:
            found = self._sets.get(client)
            if found is not None:
                self._sets.move_to_end(client)
                return found
            found = self._sets[client] = self.register(client)
            while len(self._sets) > CLIENTS_KEPT:
                self._sets.popitem(last=False)
            return found

    def script(self, client: Any, name: str) -> Any:
        """One script registered on `client` (see `on`)."""
        return getattr(self.on(client), name)


NAMES = (
    "add_delayed_job",
    "add_grouped_job",
    "add_job_scheduler",
    "add_log",
    "add_parent_job",
    "add_prioritized_job",
    "add_standard_job",
    "change_priority",
    "clean_jobs_in_set",
    "drain",
    "extend_locks",
    "get_counts",
    "get_job_fields",
    "get_job_hashes",
    "get_rate_limit_ttl",
    "get_state",
    "group_admin",
    "group_reads",
    "move_jobs_to_wait",
    "move_stalled_jobs_to_wait",
    "move_to_active",
    "move_to_delayed",
    "move_to_finished",
    "move_to_wait",
    "obliterate",
    "pause",
    "promote",
    "push_attempts",
    "release_parent",
    "remove_job",
    "remove_job_scheduler",
    "reprocess_job",
    "retry_job",
    "update_data",
    "update_job_scheduler",
    "update_progress",
)

#: BullMQ's scripts (and Bullpen's queue-side ones), `queues/lua/`.
QUEUE_LUA = LuaDir(Path(__file__).with_name("lua"), NAMES)


def source(name: str) -> str:
    """The full text of one of `queues/lua/`'s scripts, includes inlined."""
    return QUEUE_LUA.source(name)


class Scripts(ScriptSet):
    """The scripts of `queues/lua/` registered on one client (sync or asyncio).

    `register_script` sends EVALSHA and reloads the script on NOSCRIPT.
    """

    def __init__(self, client: Any) -> None:
        super().__init__(QUEUE_LUA, client)
