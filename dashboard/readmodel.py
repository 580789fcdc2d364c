"""The dashboard's read model over the queues API (no ad-hoc Redis calls)."""

from __future__ import annotations

from functools import cache
from typing import Any

import redis
from django.conf import settings

from queues import Queue
from queues.discovery import discover_queues
from queues.ops import DEFAULT_STATES


@cache
def client() -> redis.Redis:
    """One decoding client per process."""
    return redis.Redis.from_url(settings.REDIS_URL, decode_responses=True)


def queue_rows() -> list[dict[str, Any]]:
    """Each queue's prefix, name, paused flag and counts per state."""
    names = set(discover_queues(client(), settings.BULLPEN_PREFIXES))
    names.update((settings.BULLPEN_PREFIXES[0], q) for q in settings.BULLPEN_QUEUES)
    rows = []
    for prefix, name in sorted(names):
        q = Queue(name, client(), prefix)
        counts = q.get_counts(*DEFAULT_STATES)
        rows.append({"prefix": prefix, "name": name, "paused": q.is_paused(),
                     "counts": [(s.value, counts[s.value]) for s in DEFAULT_STATES]})
    return rows
