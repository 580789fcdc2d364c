"""The "model" of the GPU generation SaaS: declares the VRAM a generation
needs, holds it (simulated GPUs here; a real pipeline on a real one), steps
through the diffusion with progress, and returns the image's URL."""

from __future__ import annotations

import asyncio
from typing import Any

from gpu_workers import JobContext, handler


def vram_needed(data: Any) -> str:
    """Bigger images need more VRAM (what admission checks against the budget)."""
    size = int((data or {}).get("size", 512))
    return "10GiB" if size > 768 else "6GiB"


@handler("generate", vram=vram_needed)
async def generate(ctx: JobContext) -> dict[str, Any]:
    """Denoise in `steps` steps, reporting progress; `fail` makes it raise."""
    data = ctx.data or {}
    steps = max(int(data.get("steps", 8)), 1)
    step_s = float(data.get("step_s", 0.1))
    ctx.sim_allocate(ctx.declared_bytes)
    for step in range(1, steps + 1):
        if ctx.should_stop():
            raise RuntimeError("cancelled")
        await asyncio.sleep(step_s)
        await ctx.report_progress(round(100 * step / steps))  # type: ignore[misc]
    if data.get("fail"):
        raise RuntimeError("the model refused this prompt")
    return {"image_url": f"https://cdn.example.com/{ctx.job.id}.png", "steps": steps}
