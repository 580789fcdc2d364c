"""The API's Lua scripts (`lua/*.lua`), registered once per client."""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Any

from redis.commands.core import AsyncScript, Script

_DIR = Path(__file__).parent / "lua"
NAMES = ("rate_limit", "outbox_push", "outbox_pop")
_SOURCES = {name: (_DIR / f"{name}.lua").read_text() for name in NAMES}
_lock = threading.Lock()
_registered: weakref.WeakKeyDictionary[Any, dict[str, Script | AsyncScript]] = (
    weakref.WeakKeyDictionary()
)


def script(client: Any, name: str) -> Any:
    """The named script on this (sync or asyncio) client; EVALSHA, reloaded on
    NOSCRIPT by redis-py."""
    with _lock:
        scripts = _registered.get(client)
        if scripts is None:
            scripts = {n: client.register_script(src) for n, src in _SOURCES.items()}
            _registered[client] = scripts
        return scripts[name]
