"""What a subscribe reads once (never per event): which of the queues asked
for exist, and what a reconnecting browser missed of a queue's events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redis.exceptions import ResponseError

from queues.events import id_order

from . import defaults, messages
from .subscriptions import keys_of


async def existing(
    client: Any, queue_keys: set[str], prefixes: Iterable[str]
) -> set[str]:
    """Those of these queues that exist: they have a `meta` or `id` key
    (what discovery looks for), read in one round trip."""
    keys = sorted(queue_keys)
    if not keys:
        return set()
    prefixes = list(prefixes)
    async with client.pipeline(transaction=False) as pipe:
        for key in keys:
            qkeys = keys_of(key, prefixes)
            pipe.exists(qkeys.meta, qkeys.id)
        found = await pipe.execute()
    return {key for key, n in zip(keys, found) if n}


async def replay(
    client: Any,
    queue_key: str,
    prefixes: Iterable[str],
    after_id: str,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """Messages after a stream id (the newest `limit`), and whether some
    were left out (over the limit, or trimmed from the stream)."""
    if limit is None:
        limit = defaults.REPLAY_MAX_EVENTS
    events = keys_of(queue_key, prefixes).events
    entries = await client.xrange(events, min="(" + after_id, max="+", count=limit + 1)
    truncated = len(entries) > limit
    if truncated:
        entries = await client.xrevrange(
            events, max="+", min="(" + after_id, count=limit
        )
        entries.reverse()
    elif entries:
        truncated = await trimmed_since(client, events, after_id)
    found = [messages.from_entry(queue_key, i, raw) for i, raw in entries]
    return messages.collapse_progress(found), truncated


async def trimmed_since(client: Any, events: str, after_id: str) -> bool:
    """Whether entries after `after_id` may have been trimmed away: the id
    is older than the stream's first entry and the stream lost entries."""
    try:
        info = await client.xinfo_stream(events)
    except ResponseError:
        return False
    first = info.get("first-entry")
    if not first or id_order(first[0]) <= id_order(after_id):
        return False
    added = info.get("entries-added")
    if added is None:  # Redis < 7 does not say; only "0-0" is surely whole
        return after_id != "0-0"
    return int(added) > int(info.get("length", 0))
