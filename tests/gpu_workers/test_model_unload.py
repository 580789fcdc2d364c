"""Unloading a model gives its memory back to the driver, as the probe reads
it: on a stand-in torch whose allocator caches freed blocks the way torch's
does (a block leaves the process only in empty_cache(), and only once no
reference holds it), read through the NVML probe. The real thing runs in
bench/gpu_models_check.py on a GPU."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest

from gpu_workers.admission import VramAdmission
from gpu_workers.model_loader import ModelLoader
from gpu_workers.models import Model, ModelRegistry
from gpu_workers.probe import NvmlProbe
from gpu_workers.residency import UNRECLAIMED, Residency
from gpu_workers.resident import Resident
from tests.gpu_workers.fake_nvml import H200_UUID, FakeNvml, h200_device
from tests.gpu_workers.fake_torch import make_fake_torch

GiB = 2**30
CONTEXT = GiB // 2


class Allocator:
    """torch's caching allocator as the driver sees it: what tensors hold
    plus what they freed into the cache, shown as this process's memory."""

    def __init__(self, nvml: FakeNvml) -> None:
        self.nvml = nvml
        self.allocated = 0
        self.cached = 0
        self.show()

    def show(self) -> None:
        self.nvml.set_process_memory(
            0, os.getpid(), CONTEXT + self.allocated + self.cached
        )

    def tensor(self, nbytes: int) -> Block:
        self.allocated += nbytes
        self.show()
        return Block(self, nbytes)

    def empty_cache(self) -> None:
        self.cached = 0
        self.show()


class Block:
    """A tensor: its bytes go to the cache when the last reference goes."""

    def __init__(self, allocator: Allocator, nbytes: int) -> None:
        self.allocator = allocator
        self.nbytes = nbytes

    def __del__(self) -> None:
        self.allocator.allocated -= self.nbytes
        self.allocator.cached += self.nbytes
        self.allocator.show()


@pytest.fixture
def allocator(monkeypatch: pytest.MonkeyPatch) -> Allocator:
    nvml = FakeNvml("nvml_h200.json")
    alloc = Allocator(nvml)
    torch = make_fake_torch()
    torch.cuda.is_available = lambda: True  # type: ignore[attr-defined]
    torch.cuda.empty_cache = alloc.empty_cache  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    return alloc


def model(alloc: Allocator, nbytes: int, unload: Any = None) -> Model:
    return Model("m", lambda ctx: alloc.tensor(nbytes), nbytes, unload)


def keeping_residency(allocator: Allocator, nbytes: int, kept: list[Any]) -> Residency:
    """A residency of a 12 GiB budget whose model `m` (`nbytes`) keeps its
    weights in `kept` when unloaded, until the test clears it."""
    admission = VramAdmission(12 * GiB, 2, H200_UUID)
    registry = ModelRegistry()
    registry.register(model(allocator, nbytes, unload=kept.append))
    return Residency(admission, h200_device(), NvmlProbe(allocator.nvml), registry)


async def evict_resident(
    residency: Residency, allocator: Allocator, nbytes: int
) -> None:
    """Make `m` resident (its weights allocated), then evict it."""
    resident = Resident(residency.registry.get("m"), "loading", nbytes)
    resident.obj = allocator.tensor(nbytes)
    residency.models["m"] = resident
    residency.admission.held["m"] = nbytes
    resident.state = "unloading"
    await residency._evict(resident)


def test_an_unload_gives_the_weights_back(allocator: Allocator) -> None:
    """The loader keeps no reference through the release's empty_cache(), so
    the probe shows the weights (and a job's cached activations) gone."""
    probe = NvmlProbe(allocator.nvml)
    loader = ModelLoader(h200_device(), probe)
    m = model(allocator, 4 * GiB)

    async def run() -> tuple[int | None, int]:
        resident = Resident(m, "loading", 4 * GiB)
        took = await loader.load(resident)
        activations = allocator.tensor(GiB)  # a job ran on it, then ended
        del activations
        resident.state = "unloading"
        return took, await loader.unload(resident)

    try:
        took, shortfall = asyncio.run(run())
    finally:
        loader.close()
    assert took == 4 * GiB
    assert shortfall == 0
    assert allocator.allocated == allocator.cached == 0
    assert loader.measure() == CONTEXT


def test_an_idle_reading_frees_the_cache_an_unload_left(
    allocator: Allocator,
) -> None:
    """An unload that lets go of its weights only after empty_cache() ran (a
    model keeping a reference of its own) leaves them unreclaimed; the next
    idle check frees the allocator's cache before reading, and the budget
    gets them back."""
    kept: list[Any] = []
    residency = keeping_residency(allocator, 4 * GiB, kept)
    admission = residency.admission

    async def run() -> tuple[int, dict[str, int]]:
        await evict_resident(residency, allocator, 4 * GiB)
        left = admission.held.get(UNRECLAIMED, 0)
        kept.clear()  # the model lets go now: its block is cached
        await residency.reclaim_check(CONTEXT)
        return left, dict(admission.held)

    try:
        left, held = asyncio.run(run())
    finally:
        residency.close()
    assert left == 4 * GiB
    assert held == {}
    assert admission.free_bytes == 12 * GiB


def test_an_idle_reading_names_the_jobs_that_leaked_vram_keeps_out(
    allocator: Allocator,
) -> None:
    """A model that never lets go of its weights (a reference of its own)
    leaves them unreclaimed for good: with nothing running, the idle check's
    reading still shows them, and it names the waiting job they alone keep
    out (the worker then recycles its process). A job gone from the wait is
    no longer named; nor is any while a job runs (it may free room)."""
    kept: list[Any] = []  # (never cleared: the model keeps its weights)
    residency = keeping_residency(allocator, 8 * GiB, kept)
    admission = residency.admission

    async def run() -> tuple[list[str], list[str], list[str], int]:
        await evict_resident(residency, allocator, 8 * GiB)  # 8 GiB lost
        stop = asyncio.Event()
        waiting = asyncio.create_task(
            residency.admit("j1", None, 6 * GiB, abort=stop.is_set)
        )
        await asyncio.sleep(0.05)
        named = await residency.reclaim_check(CONTEXT)
        admission.admitted["running"] = GiB  # a job runs: no verdict
        while_running = await residency.reclaim_check(CONTEXT)
        del admission.admitted["running"]
        stop.set()
        await admission.poke()
        assert await waiting is None
        after = await residency.reclaim_check(CONTEXT)
        return named, while_running, after, admission.held.get(UNRECLAIMED, 0)

    try:
        named, while_running, after, lost = asyncio.run(run())
    finally:
        residency.close()
    assert named == ["j1"]
    assert while_running == [] and after == []
    assert lost == 8 * GiB
