"""The demo handler, for machines without GPUs: holds simulated VRAM and
steps with progress.

Job `demo`, data (all optional):
    vram    declared need, e.g. "4GiB" (default 1GiB)
    alloc   what it actually holds (default: the declared need); above the
            declared need fails the job at once (job data is untrusted)
    steps   number of steps (default 10, at most HANDLER_MAX_STEPS)
    step_s  seconds per step (default 0.1, at most HANDLER_MAX_STEP_S)
    fail    raise an ordinary error at the end (retried per attempts)
"""

from __future__ import annotations

import asyncio
from typing import Any

from .defaults import HANDLER_MAX_STEP_S, HANDLER_MAX_STEPS
from .handlers import JobContext, bounded, handler


def _declared(data: Any) -> Any:
    return (data or {}).get("vram", "1GiB")


@handler("demo", vram=_declared)
async def demo(ctx: JobContext) -> dict[str, Any]:
    """Hold simulated VRAM for `steps` x `step_s` seconds, reporting progress."""
    data = ctx.data or {}
    steps = max(int(bounded(data, "steps", 10, HANDLER_MAX_STEPS)), 1)
    step_s = bounded(data, "step_s", 0.1, HANDLER_MAX_STEP_S)
    hold = ctx.allocation(data.get("alloc", ctx.declared_bytes))
    ctx.sim_allocate(hold)
    for step in range(1, steps + 1):
        if ctx.should_stop():
            return {"stopped_at_step": step}
        await asyncio.sleep(step_s)
        await ctx.report_progress(round(100 * step / steps))  # type: ignore[misc]
    if data.get("fail"):
        raise RuntimeError("demo job asked to fail")
    return {"steps": steps, "held_bytes": hold}
