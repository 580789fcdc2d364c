"""Handlers the GPU worker tests register (imported by worker processes)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from gpu_workers.exceptions import SimulatedOutOfMemory
from gpu_workers.handlers import JobContext, handler
from gpu_workers.models import LoadContext, from_data, model, sim_model
from gpu_workers.units import parse_bytes


@handler("test.sleep", vram=lambda data: data.get("vram", 0))
def sleep_handler(ctx: JobContext) -> dict[str, Any]:
    """Sleep `s` seconds in 10 steps (a plain def: runs in a thread)."""
    total = float(ctx.data.get("s", 0.1))
    for step in range(1, 11):
        if ctx.should_stop():
            return {"stopped": step}
        time.sleep(total / 10)
        ctx.report_progress(step * 10)
    return {"slept": total}


@handler("test.async_sleep")
async def async_sleep_handler(ctx: JobContext) -> dict[str, Any]:
    """Sleep `s` seconds in 10 steps on the event loop, awaiting each
    progress write."""
    total = float(ctx.data.get("s", 0.1))
    for step in range(1, 11):
        await asyncio.sleep(total / 10)
        await ctx.report_progress(step * 10)  # type: ignore[misc]
    return {"slept": total}


@handler("test.cuda_oom", vram="1GiB")
def cuda_oom(ctx: JobContext) -> None:
    """Fail as PyTorch does when an allocation does not fit."""
    raise RuntimeError(
        "CUDA out of memory. Tried to allocate 200.00 GiB. GPU 0 has a "
        "total capacity of 139.80 GiB of which 138.00 GiB is free."
    )


@handler("test.overalloc", vram=lambda data: data.get("vram", "1GiB"))
def overalloc(ctx: JobContext) -> None:
    """Hold `alloc` simulated bytes whatever it declared (a handler that lies,
    which the shipped ones refuse to be); `break_cuda` leaves CUDA broken."""
    if ctx.data.get("break_cuda") and ctx.device.memory is not None:
        ctx.device.memory.broken = True
    ctx.sim_allocate(parse_bytes(ctx.data["alloc"]))


@handler("test.env")
def env_handler(ctx: JobContext) -> dict[str, Any]:
    """What the worker process was pinned to."""
    import os

    return {
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device": ctx.device.uuid,
        "torch_device": ctx.device.torch_device,
    }


# --- models (tests/gpu_workers/test_residency.py) ----------------------------------
_oom_once = {"left": 1}


def _fail_once() -> BaseException | None:
    if _oom_once["left"] > 0:
        _oom_once["left"] -= 1
        return SimulatedOutOfMemory("CUDA out of memory. Tried to allocate 6.0 GiB.")
    return None


sim_model("t-small", "2GiB", 0.05)
sim_model("t-mid", "6GiB", 0.05)
sim_model("t-big", "12GiB", 0.05)
sim_model("t-slow", "4GiB", 2.0)
sim_model("t-broken", "1GiB", 0.01, fail=lambda: RuntimeError("weights file missing"))
sim_model("t-oom-once", "6GiB", 0.01, fail=_fail_once)
sim_model(
    "t-oom-always",
    "6GiB",
    0.01,
    fail=lambda: SimulatedOutOfMemory("CUDA out of memory. Tried to allocate 6 GiB."),
)


def _free_unknown(obj: dict[str, Any]) -> None:
    obj["device"].memory.free(obj["sim_bytes"])


@model("t-unknown", unload=_free_unknown)  # weights measured after the first load
def _load_unknown(ctx: LoadContext) -> dict[str, Any]:
    ctx.sim_allocate(3 << 30)
    return {"model": "t-unknown", "sim_bytes": 3 << 30, "device": ctx.device}


#: What t-leaky's unloads kept: a model that holds on to its weights (a
#: global cache in the user's code), so they never come back to the device.
LEAKED: list[Any] = []


@model("t-leaky", weights="12GiB", unload=LEAKED.append)
def _load_leaky(ctx: LoadContext) -> dict[str, Any]:
    ctx.sim_allocate(12 << 30)
    return {"model": "t-leaky", "sim_bytes": 12 << 30, "device": ctx.device}


@handler(
    "test.model",
    vram=lambda data: data.get("working", "1GiB"),
    model=from_data("model"),
)
async def model_handler(ctx: JobContext) -> dict[str, Any]:
    """Hold the working memory `s` seconds on the job's resident model."""
    ctx.sim_allocate(ctx.declared_bytes)
    await asyncio.sleep(float(ctx.data.get("s", 0.05)))
    return {"model": ctx.model["model"] if ctx.model else None}
