"""What the pages read from Redis, one module per page or concern.

- `discovery`: which queues exist and may be shown (`QueueRef`, the SCAN)
- `queue`: a queue's counts, header and a page of its jobs
- `overview`: per-queue stats for the overview, the worker census
- `job`: the job page's detail, due times, VRAM record
- `attempts`: a job's attempts, recorded by Bullpen's workers or from BullMQ
- `fleet`: the GPU page's hosts, GPUs, workers and capacity
- `scan`: bounded, resumable scans (search, failure triage)
- `server`: INFO of the server or of each primary (/metrics, the Redis page)
- `redis_panel`: the Redis page (INFO, keys per prefix, slowlog)
- `workers`: the workers page (CLIENT LIST joined with GPU heartbeats)

Per-queue reads are `queues.ops` generators run together with
`queues.drive.gather`, so the overview of 100 queues costs a few pipelined
round trips, not hundreds. This module holds what they share: `run` on the
pages' client, the GPU `gpu_fleet`, and `reset` of every cache they keep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from gpu_workers import Fleet
from queues import drive, ops

from ..shared import conf
from ..shared import redis as pages_redis

#: Clearers of the caches that read modules keep (see `on_reset`).
_resets: list[Callable[[], None]] = []


def on_reset(clear: Callable[[], None]) -> None:
    """Have `reset` also call `clear` (a module's own cache)."""
    _resets.append(clear)


def reset() -> None:
    """Forget the client and every cache (tests point settings elsewhere)."""
    pages_redis.reset()
    for clear in _resets:
        clear()


def run(op: ops.Op, conn: redis.Redis | None = None) -> Any:
    """Drive an op (usually a `gather`) on `conn`, by default the pages'
    client."""
    return drive.run_sync(op, conn or pages_redis.client())


def gpu_fleet() -> Fleet:
    """The GPU worker registry on the pages' client."""
    return Fleet(pages_redis.client(), conf.get().namespace)
