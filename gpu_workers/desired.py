"""Desired counts: how many worker processes (and slots each) a host should
run per queue, one JSON field per `prefix:queue` in `bullpen:desired:{host}`.

Operators write them through `Fleet.set_desired`; a supervisor seeds them
from its config and converges to them (`DesiredCounts`), and each worker
follows its slot target.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from queues import codec

from .config import QueueConfig
from .planning import Plan

log = logging.getLogger("gpu_workers.supervisor")


def parse_desired(raw: str | None) -> dict[str, int]:
    """A desired-count hash field: {"workers": n, "slots": s} (either may be absent)."""
    if not raw:
        return {}
    try:
        value = codec.loads(raw)
    except codec.JSONDecodeError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {
        k: int(v)
        for k, v in value.items()
        if k in ("workers", "slots") and isinstance(v, int) and v >= 0
    }


class DesiredCounts:
    """One host's desired counts as its supervisor reads and seeds them."""

    def __init__(
        self, client: redis.Redis, key: str, queues: list[QueueConfig], plan: Plan
    ) -> None:
        self.client = client
        self.key = key
        self.queues = queues
        self.plan = plan
        #: The counts last read from Redis, per queue.
        self.last: dict[str, dict[str, int]] = {}

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except redis.RedisError as exc:
            log.warning("redis unavailable (%r); keeping the current workers", exc)
            return None

    def initial(self, q: QueueConfig) -> dict[str, int]:
        """The configured start: q.workers processes (None: one per planned GPU)."""
        planned = len(self.plan[q.key])
        workers = planned if q.workers is None else min(q.workers, planned)
        return {"workers": workers, "slots": q.slots}

    def seed(self, q: QueueConfig, value: dict[str, int]) -> None:
        """Write a queue's desired counts unless someone already has."""
        self._call(self.client.hsetnx, self.key, q.key, codec.dumps(value))

    def read(self) -> dict[str, dict[str, int]] | None:
        """Desired counts per queue (None when Redis does not answer).

        A configured queue missing from the hash means Redis lost it (a
        restart without persistence, a flush, failover to an empty replica):
        it is written back with the last counts this supervisor read (the
        operator's last decision), else the configured start, and never read
        as "0 workers", which would drain the host."""
        raw = self._call(self.client.hgetall, self.key)
        if raw is None:
            return None
        desired = {k: parse_desired(v) for k, v in raw.items()}
        missing = [q for q in self.queues if q.key not in desired]
        if missing:
            for q in missing:
                value = self.last.get(q.key) or self.initial(q)
                log.warning(
                    "desired counts of %s missing from Redis (restarted or "
                    "flushed?): writing back %s",
                    q.key,
                    value,
                )
                self.seed(q, value)
            raw = self._call(self.client.hgetall, self.key)
            if raw is None:
                return None
            desired = {k: parse_desired(v) for k, v in raw.items()}
        self.last.update(desired)
        return desired

    def slots(self, q: QueueConfig) -> int:
        """The slots a queue's worker processes should have now."""
        desired = self.read() or {}
        return desired.get(q.key, {}).get("slots") or q.slots
