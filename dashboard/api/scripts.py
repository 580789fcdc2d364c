"""The API's Lua scripts (`lua/*.lua`), loaded and registered once per client
by queues' one loader (`queues.scripts.LuaDir`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from queues.scripts import LuaDir

NAMES = ("rate_limit", "outbox_push", "outbox_pop")
LUA = LuaDir(Path(__file__).with_name("lua"), NAMES)


def script(client: Any, name: str) -> Any:
    """The named script on this (sync or asyncio) client; EVALSHA, reloaded on
    NOSCRIPT by redis-py."""
    return LUA.script(client, name)
