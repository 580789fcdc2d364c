"""A handler that lies about its VRAM on purpose, for bench/gpu_check.py's
OOM step: the shipped handlers refuse to allocate above their declaration,
but an operator's own handler may not, and the worker must survive that.

Job `bench.overalloc`, data: vram (declared), alloc (bytes it really takes).
"""

from __future__ import annotations

from typing import Any

from gpu_workers.handlers import JobContext, handler
from gpu_workers.units import parse_bytes


@handler("bench.overalloc", vram=lambda data: data.get("vram", "1GiB"))
def overalloc(ctx: JobContext) -> dict[str, Any]:
    """Allocate `alloc` bytes whatever was declared (torch, else simulated)."""
    nbytes = parse_bytes(ctx.data["alloc"])
    if ctx.device.simulated:
        ctx.sim_allocate(nbytes)
        return {"held_bytes": nbytes}
    import torch

    held = torch.empty(nbytes, dtype=torch.uint8, device=ctx.device.torch_device)
    held.fill_(1)
    del held
    return {"held_bytes": nbytes}
