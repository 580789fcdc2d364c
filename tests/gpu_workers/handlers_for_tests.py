"""Handlers the GPU worker tests register (imported by worker processes)."""

from __future__ import annotations

import time
from typing import Any

from gpu_workers.handlers import JobContext, handler


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


@handler("test.cuda_oom", vram="1GiB")
def cuda_oom(ctx: JobContext) -> None:
    """Fail as PyTorch does when an allocation does not fit."""
    raise RuntimeError(
        "CUDA out of memory. Tried to allocate 200.00 GiB. GPU 0 has a "
        "total capacity of 139.80 GiB of which 138.00 GiB is free."
    )


@handler("test.env")
def env_handler(ctx: JobContext) -> dict[str, Any]:
    """What the worker process was pinned to."""
    import os

    return {
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device": ctx.device.uuid,
        "torch_device": ctx.device.torch_device,
    }
