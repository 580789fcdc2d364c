"""Models resident on one GPU: loaded once, kept across jobs, evicted by
least recent use, all counted by the worker's VRAM admission.

What a job with a model commits: its working memory, plus the model's
weights when the model is not resident yet (the weights then stay held, in
`VramAdmission.held`, until the model is evicted). So at every moment:
resident weights (loading and unloading ones included) + running jobs'
working memory <= the budget.

- A model with a job on it is never evicted; idle ones are, least recently
  used first, when a job lacks room. The unload (torch: drop references,
  empty_cache) is confirmed by the probe's reading of this process; a
  shortfall stays held (`unreclaimed`) until an idle reading, taken after
  the allocator's cache is given back, shows it free. Where such a reading
  shows it still held and it alone keeps a waiting job out, only a new
  process (a new CUDA context) gets it back: reclaim_check says so and the
  worker recycles its process (model_upkeep.py, worker.py).
- A model of unknown weights reserves every byte its job does not need
  while it loads, then holds what the load measurably took.
- A CUDA OOM during a load evicts every idle model and retries once; a second
  one fails the job (retryable) and backs the model off here; any other load
  error fails the job with it and backs the model off (resident.LoadBackoff).

Loads run one at a time in their own thread (model_loader.py); the event
loop is the only writer of this state. docs/models.md tells the whole story.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .admission import VramAdmission, too_large_reason
from .clock import now_ms
from .device import Device
from .exceptions import JobTooLarge
from .model_loader import ModelLoader
from .models import ModelRegistry
from .oom import is_cuda_oom
from .probe import GpuProbe
from .resident import Counters, LoadBackoff, Resident

log = logging.getLogger("gpu_workers.residency")

#: What a residency reports as it goes: (kind, model, seconds, bytes), kind
#: one of load | evict | load_failed | load_oom.
Report = Callable[[str, str, float, int], Awaitable[None]]

UNRECLAIMED = "(unreclaimed)"


async def _no_report(kind: str, model: str, seconds: float, nbytes: int) -> None:
    """A residency that reports to nobody."""


class Residency:
    """The models resident on one worker's GPU (its event loop only)."""

    def __init__(
        self,
        admission: VramAdmission,
        device: Device,
        probe: GpuProbe,
        registry: ModelRegistry,
        report: Report = _no_report,
    ) -> None:
        self.admission = admission
        self.device = device
        self.probe = probe
        self.registry = registry
        self.report = report
        self.models: dict[str, Resident] = {}
        self.counters: dict[str, Counters] = {}
        #: Models whose load failed here, backing off.
        self.backoff = LoadBackoff(device.uuid)
        #: Weights measured fleet-wide (bullpen:models:stats), by model.
        self.known_weights: dict[str, int] = {}
        #: Expected load seconds from past loads, by model.
        self.expected_s: dict[str, float] = {}
        self.pinned: frozenset[str] = frozenset()
        self.pool: frozenset[str] = frozenset()
        self.loader = ModelLoader(device, probe)
        #: Jobs in admit() not admitted yet: key -> (model or None, working).
        self.waiting: dict[str, tuple[str | None, int]] = {}

    def resident(self) -> frozenset[str]:
        """Models resident or loading here."""
        return frozenset(n for n, r in self.models.items() if r.state != "unloading")

    def wanted(self) -> frozenset[str]:
        """Models this GPU should keep: its warm-pool share and operator pins."""
        return self.pool | self.pinned

    def backing_off(self, name: str) -> bool:
        """Whether a failed load of `name` here still backs off."""
        return self.backoff.active(name)

    def weights_of(self, name: str) -> int | None:
        """Declared weights, else measured ones, else None (unknown)."""
        model = self.registry.get(name)
        if model.weights is not None:
            return model.weights
        return self.known_weights.get(name)

    def evictable(self, keep: str | None = None) -> list[Resident]:
        """Idle resident models, least recently used first (pinned last)."""
        idle = [
            r
            for n, r in self.models.items()
            if r.state == "resident" and not r.users and n != keep
        ]
        return sorted(idle, key=lambda r: (r.model.name in self.pinned, r.last_used))

    def loadable_without_eviction(self, name: str) -> bool:
        """Whether `name` would load here now with no model evicted."""
        weights = self.weights_of(name)
        return weights is not None and weights < self.admission.free_bytes

    def expected_load_s(self, name: str) -> float:
        """Seconds a load of `name` takes: past loads, else its declaration."""
        known = self.expected_s.get(name)
        if known is not None:
            return known
        return self.registry.get(name).load_seconds or 0.0

    def has_free_slot(self) -> bool:
        """Whether the worker could take one more job."""
        return len(self.admission.admitted) < self.admission.slots

    # --- admission --------------------------------------------------------------------
    def check_fits_at_all(self, name: str, working: int) -> None:
        """JobTooLarge when weights + working memory exceed the whole budget."""
        weights = self.weights_of(name) or 0
        budget = self.admission.budget_bytes
        if weights + working > budget:
            raise JobTooLarge(
                too_large_reason(weights + working, budget, self.admission.gpu)
                + f" (model {name}: {weights} bytes of weights + {working} working)"
            )

    async def admit(
        self, job_id: str, name: str | None, working: int, abort: Callable[[], bool]
    ) -> Resident | None | bool:
        """Commit `working` for the job, evicting idle models when the
        budget lacks room, and with a model (`name`) make it resident for
        the job, loading it if needed. Returns the resident model (True for a
        job without one; None: aborted first)."""
        if name is None:
            self.admission.check_fits_at_all(working)
        else:
            self.check_fits_at_all(name, working)
            self.backoff.check(name)
        self.waiting[job_id] = (name, working)  # (kept_out() reads it)
        try:
            return await self._admit(job_id, name, working, abort)
        finally:
            self.waiting.pop(job_id, None)

    async def _admit(
        self, job_id: str, name: str | None, working: int, abort: Callable[[], bool]
    ) -> Resident | None | bool:
        """admit() once the job is known to fit the budget at all."""
        adm = self.admission
        changed = adm.condition()
        while True:
            victims: list[Resident] = []
            load: Resident | None = None
            resident: Resident | None = None
            async with changed:
                await changed.wait_for(lambda: abort() or self._room(name, working))
                if abort():
                    return None
                present = self.models.get(name) if name is not None else None
                if name is None or present is not None:
                    need = working
                else:
                    need = self._reserve_for(name, working) + working
                if need > adm.free_bytes:
                    victims = self._pick_victims(need, name)
                else:
                    if name is not None and present is None:
                        load = self._begin_load(name, need - working)
                    resident = load or present
                    adm.admitted[job_id] = working
                    if resident is not None:
                        resident.users.add(job_id)
                    adm.committed()
            if not victims:
                break
            await self._evict_all(victims)
        if resident is None:
            return True
        if load is not None:
            await self._load(load)
        await resident.loaded.wait()
        if resident.error is not None:
            await self.leave(job_id, resident.model.name)
            await self.admission.release(job_id)
            raise resident.error
        resident.last_used = time.monotonic()
        resident.last_used_ms = now_ms()
        return resident

    async def leave(self, job_id: str, name: str) -> None:
        """The job is done with its model (its working memory is released by
        admission.release)."""
        resident = self.models.get(name)
        if resident is not None:
            resident.users.discard(job_id)
            resident.last_used = time.monotonic()
            resident.last_used_ms = now_ms()
        await self.admission.poke()

    def _room(self, name: str | None, working: int, lost: int = 0) -> bool:
        """Whether the job can go on now: commit, or evict idle models (never
        the job's own) to make room; or could, with `lost` bytes more free."""
        adm = self.admission
        present = self.models.get(name) if name is not None else None
        if present is not None and present.state == "unloading":
            return False  # wait until it is gone, then load it again
        need = working
        if name is not None and present is None:
            need += self._reserve_for(name, working)
        reclaimable = sum(r.weights_bytes for r in self.evictable(keep=name))
        return need <= adm.free_bytes + reclaimable + lost

    def kept_out(self) -> list[str]:
        """The waiting jobs that unreclaimed VRAM alone keeps out: they would
        go on if it were given back (the keys admit() was given)."""
        lost = self.admission.held.get(UNRECLAIMED, 0)
        if not lost:
            return []
        return [
            key
            for key, (name, working) in self.waiting.items()
            if not self._room(name, working) and self._room(name, working, lost)
        ]

    def _reserve_for(self, name: str, working: int) -> int:
        """Bytes to hold while `name` loads: its weights, or (unknown) every
        byte of the budget this job and the other holders do not need."""
        weights = self.weights_of(name)
        if weights is not None:
            return weights
        adm = self.admission
        others = adm.committed_bytes - sum(
            r.weights_bytes for r in self.evictable(keep=name)
        )
        return max(adm.budget_bytes - others - working, 0)

    def _pick_victims(self, need: int, keep: str | None) -> list[Resident]:
        """Idle models to evict, LRU first, until `need` fits; marked unloading."""
        victims: list[Resident] = []
        free = self.admission.free_bytes
        for resident in self.evictable(keep=keep):
            if need <= free:
                break
            resident.state = "unloading"
            victims.append(resident)
            free += resident.weights_bytes
        return victims

    def _begin_load(self, name: str, weights: int) -> Resident:
        resident = Resident(self.registry.get(name), "loading", weights)
        resident.expected_s = self.expected_s.get(name, resident.model.load_seconds)
        self.models[name] = resident
        self.admission.held[name] = weights
        return resident

    # --- loading and unloading ---------------------------------------------------
    async def _load(self, resident: Resident) -> None:
        """Run the load (retrying once after an OOM); settle the reservation."""
        name = resident.model.name
        started = time.monotonic()
        error: BaseException | None = None
        measured: int | None = None
        for attempt in (1, 2):
            try:
                measured = await self.loader.load(resident)
                error = None
                break
            except Exception as exc:  # noqa: BLE001 - a load error fails jobs, not us
                error = exc
                if not is_cuda_oom(exc) or attempt == 2:
                    break
                self.count(name).load_ooms += 1
                await self.report("load_oom", name, time.monotonic() - started, 0)
                await self._evict_all(self._pick_victims(1 << 62, name))
        seconds = time.monotonic() - started
        if error is not None:
            await self._failed(resident, error, seconds)
            return
        if self.weights_of(name) is None and measured is not None:
            async with self.admission.condition():
                resident.weights_bytes = measured
                self.admission.held[name] = measured
                self.admission.condition().notify_all()
            self.known_weights[name] = measured
        resident.state = "resident"
        resident.since_ms = now_ms()
        self.count(name).loaded(seconds)
        self.expected_s[name] = seconds
        self.backoff.clear(name)
        resident.loaded.set()
        await self.report("load", name, seconds, resident.weights_bytes)

    async def _failed(
        self, resident: Resident, error: BaseException, seconds: float
    ) -> None:
        name = resident.model.name
        self.count(name).load_failures += 1
        resident.error = self.backoff.failed(name, error)
        await self._drop(resident)
        resident.loaded.set()
        await self.report("load_failed", name, seconds, 0)

    async def _drop(self, resident: Resident) -> None:
        async with self.admission.condition():
            self.models.pop(resident.model.name, None)
            self.admission.held.pop(resident.model.name, None)
            self.admission.condition().notify_all()
        self.admission.wake()

    async def _evict_all(self, victims: list[Resident]) -> None:
        for resident in victims:
            await self._evict(resident)

    async def _evict(self, resident: Resident) -> None:
        """Unload one model; the probe confirms what came back, and what did
        not stays held until a reading shows it free (reclaim_check)."""
        name = resident.model.name
        shortfall = await self.loader.unload(resident)
        async with self.admission.condition():
            self.models.pop(name, None)
            self.admission.held.pop(name, None)
            if shortfall:
                self.admission.held[UNRECLAIMED] = (
                    self.admission.held.get(UNRECLAIMED, 0) + shortfall
                )
            self.admission.condition().notify_all()
        self.count(name).evictions += 1
        self.admission.wake()
        await self.report("evict", name, 0.0, resident.weights_bytes - shortfall)

    async def preload(self, name: str) -> bool:
        """Load a wanted model with no job (a warm pool or a pin), only when
        it fits after evicting idle models that are not wanted. True: loaded."""
        if name in self.models or self.backing_off(name):
            return False
        weights = self.weights_of(name)
        if weights is None:
            return False
        async with self.admission.condition():
            wanted = self.wanted()
            spare = [r for r in self.evictable(keep=name) if r.model.name not in wanted]
            if weights > self.admission.free_bytes + sum(
                r.weights_bytes for r in spare
            ):
                return False
            victims = []
            free = self.admission.free_bytes
            for r in spare:
                if weights <= free:
                    break
                r.state = "unloading"
                victims.append(r)
                free += r.weights_bytes
        await self._evict_all(victims)
        async with self.admission.condition():
            if name in self.models or weights > self.admission.free_bytes:
                return False
            resident = self._begin_load(name, weights)
            self.admission.committed()
        await self._load(resident)
        return resident.error is None

    async def reclaim_check(self, context_bytes: int) -> list[str]:
        """With nothing running, a reading shows what the process holds:
        unreclaimed bytes it no longer holds are released. Returns the
        waiting jobs that what it still holds keeps out (kept_out()): only a
        new process gets those bytes back."""
        if UNRECLAIMED not in self.admission.held or self.admission.admitted:
            return []
        await self.loader.free_cached()  # what a job or unload left cached
        used = self.loader.measure()
        if used is None:
            return []
        weights = sum(r.weights_bytes for r in self.models.values())
        still = max(used - context_bytes - weights, 0)
        async with self.admission.condition():
            if still < self.admission.held.get(UNRECLAIMED, 0):
                if still:
                    self.admission.held[UNRECLAIMED] = still
                else:
                    self.admission.held.pop(UNRECLAIMED, None)
                self.admission.condition().notify_all()
        self.admission.wake()
        return [] if self.admission.admitted else self.kept_out()

    def count(self, name: str) -> Counters:
        """The counters of one model (made on first use)."""
        return self.counters.setdefault(name, Counters())

    def close(self) -> None:
        """Stop the loader thread (loaded objects go with the process)."""
        self.loader.close()

    def summary(self) -> list[dict[str, Any]]:
        """The heartbeat's `models`."""
        wanted = self.wanted()
        return [
            r.summary(name in self.pinned, name in wanted)
            for name, r in sorted(self.models.items())
        ]

    def counters_summary(self) -> dict[str, Any]:
        """The heartbeat's `model_counters`."""
        return {name: c.as_dict() for name, c in sorted(self.counters.items())}

    def loading_of(self, name: str) -> dict[str, Any] | None:
        """A job's `loading` while its model loads."""
        resident = self.models.get(name)
        if resident is None or resident.state != "loading":
            return None
        return {
            "model": name,
            "since_ms": resident.since_ms,
            "expected_s": resident.expected_s,
        }
