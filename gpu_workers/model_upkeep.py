"""A GPU worker's side of its resident models that talks to Redis.

- Reports each load, eviction and failed load: the `bullpen:models:events`
  stream, the GPU's counters, the model's fleet-wide stats (measured weights,
  expected load time, jobs and their seconds; `lua/model_stats.lua`) and
  GPU-time accounting (a load is billed to its queue under the job name
  `load:<model>`, with no tenant: cold starts are the platform's cost).
- Every heartbeat interval: reads the stats (measured weights, expected load
  times), this GPU's operator pins and warm-pool share, preloads a wanted
  model when the worker has nothing waiting, frees unreclaimed VRAM a
  reading shows given back (and where RECYCLE_READINGS readings in a row
  show it still held and keeping a waiting job out, calls `on_stuck`: the
  process recycles), and publishes where models are warm (placement.py)
  through `publish`.

Nothing here may take the worker down: a Redis error is reported to the
worker's background (logged, outage-aware) and the loop goes on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from queues.names import qualified_name

from . import defaults
from .clock import now_ms
from .gputime import NO_TENANT, GpuTimeRecorder, Usage
from .keys import BullpenKeys
from .models import MODEL_NAME
from .placement import Placement
from .residency import UNRECLAIMED, Residency
from .scripts import LUA

log = logging.getLogger("gpu_workers.models")

#: The models warm on the GPU, and those open to each queue's placement.
WarmOpen = tuple[frozenset[str], tuple[frozenset[str], ...]]


#: Called with the worker's background-failure reporter's arguments.
Failed = Callable[[str, BaseException], None]


def _names(raw: Any, fresh_after_ms: int = 0) -> frozenset[str]:
    """A JSON list of model names from Redis, or a pool record's `models`
    (none when its `ts_ms` is older than `fresh_after_ms`: no supervisor
    plans any more); anything else: none."""
    try:
        value = json.loads(raw) if raw else []
    except (TypeError, ValueError):
        return frozenset()
    if isinstance(value, dict):
        written = value.get("ts_ms")
        if not isinstance(written, int) or written < fresh_after_ms:
            return frozenset()
        value = value.get("models", [])
    if not isinstance(value, list):
        return frozenset()
    return frozenset(v for v in value if isinstance(v, str) and MODEL_NAME.fullmatch(v))


class ModelUpkeep:
    """Reports and refreshes one worker's resident models."""

    def __init__(
        self,
        residency: Residency,
        bp: Any,
        bkeys: BullpenKeys,
        *,
        gpu: str,
        host: str,
        worker_id: str,
        queue: str,
        prefix: str,
        context_bytes: int,
        gpu_time: GpuTimeRecorder,
        failed: Failed,
        waiting: Callable[[], bool],
        ttl_s: float = defaults.HEARTBEAT_TTL_S,
    ) -> None:
        self.residency = residency
        self._bp = bp
        self.bkeys = bkeys
        self.gpu = gpu
        self.host = host
        self.worker_id = worker_id
        self.queue = queue
        self.prefix = prefix
        self.context_bytes = context_bytes
        self.gpu_time = gpu_time
        self._failed = failed
        #: Whether a claimed job waits for VRAM (then nothing is preloaded).
        self._waiting = waiting
        #: Each queue worker's placement (its members of the warm and open
        #: zsets): one, or one per queue where queues share the process.
        self.placements: list[Placement] = []
        self.ttl_s = ttl_s
        self._published: WarmOpen | None = None
        #: Set when pins or the warm pool changed (control.py): loop() reads
        #: them at its next round.
        self.read_due = True
        self._stats_script = LUA.script(bp, "model_stats")
        residency.report = self.report
        #: Called with the unreclaimed bytes once RECYCLE_READINGS idle
        #: readings in a row showed them keeping waiting jobs out (the
        #: worker, or the GPU process, recycles).
        self.on_stuck: Callable[[int], Awaitable[None]] | None = None
        self._stuck_readings = 0

    async def report(self, kind: str, model: str, seconds: float, nbytes: int) -> None:
        """Record one load, eviction or failure (never raises)."""
        try:
            pipe = self._bp.pipeline(transaction=False)
            pipe.xadd(
                self.bkeys.model_events(),
                {
                    "gpu": self.gpu,
                    "host": self.host,
                    "worker": self.worker_id,
                    "model": model,
                    "kind": kind,
                    "seconds": f"{seconds:.3f}",
                    "bytes": nbytes,
                    "ts_ms": now_ms(),
                },
                maxlen=defaults.MODEL_EVENTS_MAXLEN,
                approximate=True,
            )
            field = {
                "load": "model_loads",
                "evict": "model_evictions",
                "load_failed": "model_load_failures",
                "load_oom": "model_load_ooms",
            }[kind]
            pipe.hincrby(self.bkeys.gpu_counters(self.gpu), field, 1)
            await pipe.execute()
            if kind == "load":
                await self._stat(model, "load", seconds, nbytes)
                end = time.time()
                await self.gpu_time.record(
                    Usage(
                        queue=qualified_name(self.prefix, self.queue),
                        name=f"load:{model}",
                        tenant=NO_TENANT,
                        started_s=end - seconds,
                        ended_s=end,
                        vram_bytes=nbytes,
                        simulated=bool(self.residency.device.simulated),
                    )
                )
            await self.publish()
        except Exception as exc:  # noqa: BLE001 - reporting must not fail a load
            self._failed(f"reporting a model {kind} of {model}", exc)

    async def job_done(self, model: str, seconds: float) -> None:
        """Count one job that ran on `model` (the pools weigh backlogs by it)."""
        self.residency.count(model).jobs += 1
        try:
            await self._stat(model, "job", seconds, 0)
        except Exception as exc:  # noqa: BLE001 - stats must not fail the job
            self._failed(f"counting a job of model {model}", exc)

    async def _stat(self, model: str, kind: str, seconds: float, nbytes: int) -> None:
        await self._stats_script(
            keys=[self.bkeys.model_stats()],
            args=[
                model,
                kind,
                f"{seconds:.4f}",
                nbytes,
                defaults.MODEL_LOAD_EWMA,
                now_ms(),
            ],
        )

    async def refresh(self) -> None:
        """Read stats, pins and the pool; preload; reclaim; publish."""
        await self.read()
        await self.act()

    async def read(self) -> None:
        """Read model stats, this GPU's pins and its warm pool."""
        res = self.residency
        pipe = self._bp.pipeline(transaction=False)
        pipe.hgetall(self.bkeys.model_stats())
        pipe.hget(self.bkeys.model_pins(), self.gpu)
        pipe.hget(self.bkeys.model_pool(), self.gpu)
        stats, pins, pool = await pipe.execute()
        for name, raw in (stats or {}).items():
            try:
                entry = json.loads(raw)
                weights = int(entry.get("weights_bytes") or 0)
                ewma = float(entry.get("ewma_load_s") or 0)
            except (TypeError, ValueError, AttributeError):
                continue
            if weights > 0:
                res.known_weights[name] = weights
            if ewma > 0:
                res.expected_s[name] = ewma
        res.pinned = frozenset(n for n in _names(pins) if n in res.registry)
        fresh = now_ms() - int(defaults.POOL_STALE_S * 1000)
        res.pool = frozenset(n for n in _names(pool, fresh) if n in res.registry)

    async def act(self) -> None:
        """Preload a wanted model when idle, reclaim, publish (by what was
        read last)."""
        res = self.residency
        if not self._waiting() and not res.admission.admitted:
            for name in sorted(res.wanted() - res.resident()):
                if await res.preload(name):
                    break  # one load per interval: jobs may be waiting
        kept_out = await res.reclaim_check(self.context_bytes)
        self._stuck_readings = self._stuck_readings + 1 if kept_out else 0
        if self._stuck_readings >= defaults.RECYCLE_READINGS and self.on_stuck:
            self._stuck_readings = 0
            await self.on_stuck(res.admission.held.get(UNRECLAIMED, 0))
        await self.publish()

    def _warm_open(self) -> WarmOpen:
        """The models warm here, and for each queue's placement those open:
        loaded, while the GPU has a free slot and so does that queue."""
        res = self.residency
        warm = res.resident()
        loaded = frozenset(n for n in warm if res.models[n].state == "resident")
        if not res.has_free_slot():
            loaded = frozenset()
        return warm, tuple(
            loaded if p.has_room() else frozenset() for p in self.placements
        )

    async def publish(self) -> None:
        """This worker's members of the warm and open zsets (placement.py),
        their expiry renewed."""
        if not self.placements:
            return
        warm, opened = self._warm_open()
        for placement, open_models in zip(self.placements, opened, strict=True):
            await placement.publish(self._bp, warm, open_models, self.ttl_s)
        self._published = (warm, opened)

    async def publish_if_changed(self) -> None:
        """publish() when what is warm or open changed (a job started or
        ended); never raises."""
        if not self.placements or self._warm_open() == self._published:
            return
        try:
            await self.publish()
        except Exception as exc:  # noqa: BLE001 - the next refresh publishes
            self._failed("publishing warm models", exc)

    async def loop(
        self, pause: Callable[[float], Awaitable[bool]], every: float
    ) -> None:
        """act() every `every` seconds (the heartbeat's interval: the
        warm/open members it renews expire with the heartbeat) until `pause`
        says stop, reading first when `read_due` (a pushed change of pins
        or pool) or every MODEL_REFRESH_S; nothing at all where no model is
        declared."""
        if not self.residency.registry.names():
            return
        read_at = 0.0
        while await pause(every):
            try:
                if self.read_due or time.monotonic() >= read_at:
                    self.read_due = False
                    read_at = time.monotonic() + defaults.MODEL_REFRESH_S
                    await self.read()
                await self.act()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep going after Redis blips
                self._failed("model upkeep", exc)
