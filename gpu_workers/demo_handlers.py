"""The demo handler, for machines without GPUs: holds simulated VRAM and
steps with progress.

Job `demo`, data (all optional):
    vram    declared need, e.g. "4GiB" (default 1GiB)
    alloc   what it actually holds (default: the declared need); more than
            the device has raises a simulated "CUDA out of memory"
    steps   number of steps (default 10)
    step_s  seconds per step (default 0.1)
    fail    raise an ordinary error at the end (retried per attempts)
    break_cuda  leave the simulated CUDA broken after an OOM (the process
            exits and is restarted)
"""

from __future__ import annotations

import asyncio
from typing import Any

from .handlers import JobContext, handler
from .units import parse_bytes


def _declared(data: Any) -> Any:
    return (data or {}).get("vram", "1GiB")


@handler("demo", vram=_declared)
async def demo(ctx: JobContext) -> dict[str, Any]:
    """Hold simulated VRAM for `steps` x `step_s` seconds, reporting progress."""
    data = ctx.data or {}
    steps = max(int(data.get("steps", 10)), 1)
    step_s = float(data.get("step_s", 0.1))
    hold = parse_bytes(data.get("alloc", ctx.declared_bytes))
    if data.get("break_cuda") and ctx.device.memory is not None:
        ctx.device.memory.broken = True
    ctx.sim_allocate(hold)
    for step in range(1, steps + 1):
        if ctx.should_stop():
            return {"stopped_at_step": step}
        await asyncio.sleep(step_s)
        await ctx.report_progress(round(100 * step / steps))  # type: ignore[misc]
    if data.get("fail"):
        raise RuntimeError("demo job asked to fail")
    return {"steps": steps, "held_bytes": hold}
