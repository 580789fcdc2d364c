"""Finding queues in Redis: every `{prefix}:{name}:meta` or `:id` key marks one."""

from __future__ import annotations

from collections.abc import Iterable

import redis

_MARKERS = ("meta", "id")


def discover_queues(
    client: redis.Redis, prefixes: Iterable[str] = ("bull",), scan_count: int = 1000
) -> list[tuple[str, str]]:
    """(prefix, name) of every queue found by SCAN (never KEYS), sorted."""
    found: set[tuple[str, str]] = set()
    for prefix in prefixes:
        for marker in _MARKERS:
            for key in client.scan_iter(match=f"{prefix}:*:{marker}", count=scan_count):
                if isinstance(key, bytes):
                    key = key.decode()
                name = key[len(prefix) + 1 : -len(marker) - 1]
                if name and ":" not in name:
                    found.add((prefix, name))
    return sorted(found)
