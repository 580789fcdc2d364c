"""What every read of Redis by the dashboard shares: `run` on the pages'
client, the GPU `gpu_fleet` and its `fleet_snapshot`, and `reset` of every
cache the reads keep (the operator app's page reads, dashboard/console/reads/,
and queue discovery)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from gpu_workers import Fleet
from gpu_workers.fleet_cache import SnapshotCache
from gpu_workers.fleet_snapshot import FleetSnapshot
from queues import drive, ops

from . import conf
from . import redis as pages_redis

#: Clearers of the caches that read modules keep (see `on_reset`).
_resets: list[Callable[[], None]] = []


def on_reset(clear: Callable[[], None]) -> None:
    """Have `reset` also call `clear` (a module's own cache)."""
    _resets.append(clear)


def reset() -> None:
    """Forget the client and every cache (tests point settings elsewhere)."""
    global _snapshots
    pages_redis.reset()
    _snapshots = None
    for clear in _resets:
        clear()


def run(op: ops.Op, conn: redis.Redis | None = None) -> Any:
    """Drive an op (usually a `gather`) on `conn`, by default the pages'
    client."""
    return drive.run_sync(op, conn or pages_redis.client())


def gpu_fleet() -> Fleet:
    """The GPU worker registry on the pages' client."""
    return Fleet(pages_redis.client(), conf.get().namespace)


_snapshots: SnapshotCache | None = None


def fleet_snapshot() -> FleetSnapshot:
    """The fleet as this process last read it, at most BULLPEN_FLEET_MAX_AGE_S
    old while it can be (gpu_workers/fleet_cache.py): what the GPU page,
    the overview's GPU workers and /metrics show, so that their cost per
    request does not grow with the fleet."""
    global _snapshots
    cache = _snapshots
    if cache is None:
        cache = _snapshots = SnapshotCache(
            lambda: gpu_fleet().snapshot(), conf.get().fleet_max_age_s
        )
    return cache.get()
