"""Running model loads and unloads, one at a time in their own thread, and
measuring what they take and give back with the worker's probe."""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor

from . import defaults
from .device import Device
from .models import LoadContext, free_cached_memory
from .probe import GpuProbe
from .resident import Resident

log = logging.getLogger("gpu_workers.residency")


class ModelLoader:
    """Loads and unloads the models of one GPU (its event loop only)."""

    def __init__(self, device: Device, probe: GpuProbe) -> None:
        self.device = device
        self.probe = probe
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="model-load")

    def measure(self) -> int | None:
        """This process's VRAM now, as the probe reads it (None: no reading)."""
        try:
            return self.probe.process_memory(self.device.uuid).get(os.getpid())
        except Exception:  # noqa: BLE001 - a missing reading is not an error
            return None

    async def load(self, resident: Resident) -> int | None:
        """Run the model's load once (its errors propagate); keep what it
        returns on `resident`. Returns the bytes it measurably took."""
        loop = asyncio.get_running_loop()
        ctx = LoadContext(resident.model.name, self.device)
        before = self.measure()
        resident.obj = await loop.run_in_executor(
            self._thread, resident.model.load, ctx
        )
        after = self.measure()
        if before is None or after is None:
            return None
        return max(after - before, 0)

    async def unload(self, resident: Resident) -> int:
        """Run the model's unload; returns the bytes the probe does not show
        given back (0 when at least MODEL_RECLAIM_SHARE came back, or when
        nothing can be read)."""
        loop = asyncio.get_running_loop()
        before = self.measure()
        # Handed over in a list the release empties: a reference kept here
        # would keep the weights allocated through its empty_cache().
        holder, resident.obj = [resident.obj], None
        try:
            await loop.run_in_executor(self._thread, resident.model.release, holder)
        except Exception as exc:  # noqa: BLE001 - count it, keep the bytes held
            log.warning("unloading model %s raised: %r", resident.model.name, exc)
        holder.clear()
        after = self.measure()
        if before is None or after is None:
            return 0
        freed = max(before - after, 0)
        if freed >= resident.weights_bytes * defaults.MODEL_RECLAIM_SHARE:
            return 0
        return resident.weights_bytes - freed

    async def free_cached(self) -> None:
        """Give what the allocator caches back to the driver (gc, then
        torch's empty_cache), in the load thread."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, free_cached_memory)

    def close(self) -> None:
        """Stop the thread (loaded objects go with the process)."""
        self._thread.shutdown(wait=False, cancel_futures=True)
