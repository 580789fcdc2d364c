"""Which queues live under the API's prefix, for a `*` token's listing: the
SCAN of `queues.discovery`, its result shared by a process's requests (see
`queues.discovery.CachedDiscovery` for when it rescans)."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from queues.discovery import CachedDiscovery, discover_queues

from ..shared import conf


def _scan(conn: redis.Redis, prefixes: Sequence[str]) -> list[tuple[str, str]]:
    return discover_queues(conn, prefixes)  # looked up here: tests replace it


#: The queues under the API's prefix, with the dashboard's discovery settings.
#: A listing must be whole, so its first call waits for the scan where a
#: page answers with the registry's list at once.
api_queues = CachedDiscovery(
    lambda: [conf.get().prefix],
    lambda: conf.get().discovery_ttl_s,
    lambda: conf.get().redis_timeout_s,
    _scan,
    from_registry=False,
)


def reset() -> None:
    """Forget the cached result (tests point settings elsewhere)."""
    api_queues.reset()
