"""Bullpen's function libraries in one Redis (queues/luafunctions.py): which
are there, which this version sends, and deleting the others
(`python -m queues functions [--prune]`).

Libraries persist like data, so each upgrade that changes a script leaves
the old version's library behind. Deleting one a Bullpen of another version
still sends is safe: its next call meets "Function not found" and loads it
again (queues/scriptcalls.py), one round trip.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from .scripts import NAMES, QUEUE_LUA

#: The name of a library luafunctions.build makes: bullpen_<script>_<hash>.
LIBRARY_NAME = re.compile(r"^bullpen_[a-z0-9_]+_[0-9a-f]{16}$")


@dataclass(frozen=True)
class Library:
    """One Bullpen library in Redis; `current`: this version sends it."""

    name: str
    current: bool


def current_names() -> frozenset[str]:
    """The libraries this version of Bullpen sends FCALLs to."""
    found = (QUEUE_LUA.function(name) for name in NAMES)
    return frozenset(f.name for f in found if f is not None)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def libraries(client: Any) -> list[Library]:
    """Bullpen's libraries in `client`'s Redis, by name. Raises ResponseError
    where Redis has no functions (before 7.0) or an ACL refuses FUNCTION."""
    reply = client.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "bullpen_*")
    current = current_names()
    names = set()
    for entry in reply:
        # RESP2: a flat [field, value, ...] list per library; RESP3: a map.
        fields = (
            entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2]))
        )
        name = _text(fields.get("library_name", fields.get(b"library_name", "")))
        if LIBRARY_NAME.match(name):
            names.add(name)
    return [Library(name, name in current) for name in sorted(names)]


def prune(client: Any, found: list[Library] | None = None) -> list[str]:
    """Delete the Bullpen libraries this version does not send; their names.
    `found`: what libraries() just listed (else listed here)."""
    deleted = []
    for library in libraries(client) if found is None else found:
        if library.current:
            continue
        try:
            client.execute_command("FUNCTION", "DELETE", library.name)
        except ResponseError as exc:
            if "library not found" not in str(exc).lower():
                raise
            continue  # deleted meanwhile (another prune)
        deleted.append(library.name)
    return deleted
