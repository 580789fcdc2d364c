"""Finding queues in Redis: every `{prefix}:{name}:meta` or `:id` key marks one.

One SCAN pass per prefix matches both markers (`{prefix}:*:[mi][ed]*`) and the
exact suffix is checked here: Redis's glob over every key is the cost of a
scan, so one pass over a million keys costs half of one pass per marker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import redis

_MARKERS = (":meta", ":id")
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def discover_queues(
    client: redis.Redis, prefixes: Iterable[str] = ("bull",), scan_count: int = 5000
) -> list[tuple[str, str]]:
    """(prefix, name) of every queue found by SCAN (never KEYS), sorted."""
    found: set[tuple[str, str]] = set()
    for prefix in prefixes:
        pattern = _GLOB_SPECIAL.sub(r"\\\1", prefix) + ":*:[mi][ed]*"
        head = len(prefix) + 1
        for key in client.scan_iter(match=pattern, count=scan_count):
            if isinstance(key, bytes):
                key = key.decode(errors="surrogateescape")
            for marker in _MARKERS:
                if key.endswith(marker):
                    name = key[head : -len(marker)]
                    if name and ":" not in name:
                        found.add((prefix, name))
    return sorted(found)
