"""Loading the Lua scripts in `queues/lua/` and registering them per client.

A script may pull shared helpers from `lua/includes/` with a line
`--- @include "name"`; each include is inlined once, in order.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"\s*$', re.MULTILINE)

NAMES = (
    "add_delayed_job",
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
    "get_state",
    "move_jobs_to_wait",
    "move_stalled_jobs_to_wait",
    "move_to_active",
    "move_to_delayed",
    "move_to_finished",
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


_LUA_DIR = Path(__file__).with_name("lua")


def _read(relative: str) -> str:
    return (_LUA_DIR / relative).read_text("utf-8")


@cache
def source(name: str) -> str:
    """The full text of a script with its includes inlined."""
    seen: set[str] = set()

    def expand(text: str) -> str:
        def include(match: re.Match[str]) -> str:
            inc = match.group(1)
            if inc in seen:
                return ""
            seen.add(inc)
            return expand(_read(f"includes/{inc}.lua"))

        return _INCLUDE.sub(include, text)

    return expand(_read(f"{name}.lua"))


class Scripts:
    """The scripts registered on one redis-py client (sync or asyncio).

    `register_script` sends EVALSHA and reloads the script on NOSCRIPT.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        for name in NAMES:
            setattr(self, name, client.register_script(source(name)))

    def __getattr__(
        self, name: str
    ) -> Any:  # for type checkers: attributes are set above
        raise AttributeError(name)
