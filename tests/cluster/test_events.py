"""QueueEvents on a 3-primary Redis Cluster: the single-node tests that take a
URL, and a quiet stream outwaited by a cluster client with a short read
timeout (for_blocking makes a cluster sibling that waits longer)."""

from __future__ import annotations

import asyncio
import time

from queues import AsyncQueueEvents, Queue, QueueEvents
from queues.connection import async_from_url, sync_from_url
from tests.queues.test_events import (  # noqa: F401 (re-run here)
    test_dollar_means_only_new_events,
    test_events_from_start_are_typed,
)


def test_a_quiet_stream_outwaits_a_cluster_clients_read_timeout(
    redis_url: str, qname: str
) -> None:
    """A cluster client reading with 0.3 s: a 600 ms BLOCK on a quiet stream
    returns [] instead of timing out, sync and asyncio; iterating works."""
    queue = Queue(qname, redis_url)
    queue.add("x", {})
    short = sync_from_url(redis_url, socket_timeout=0.3, decode_responses=True)
    events = QueueEvents(qname, short, block_ms=600)
    started = time.monotonic()
    assert events.read() == []
    assert 0.5 < time.monotonic() - started < 2
    queue.add("y", {})
    assert next(iter(events)).event == "added"  # iterating names the connection
    events.close()
    queue.close()
    short.close()

    async def main() -> None:
        short = async_from_url(redis_url, socket_timeout=0.3, decode_responses=True)
        events = AsyncQueueEvents(qname, short, block_ms=600)
        started = time.monotonic()
        assert await events.read() == []
        assert 0.5 < time.monotonic() - started < 2
        await events.close()
        await short.aclose()

    asyncio.run(main())
