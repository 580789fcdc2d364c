"""Handlers the GPU worker tests register (imported by worker processes)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from gpu_workers.handlers import JobContext, handler
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
