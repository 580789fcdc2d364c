"""A real PyTorch handler: allocates the declared VRAM on the pinned GPU and
runs matrix multiplications step by step. torch is imported only inside the
handler, so worker processes that never run it start without it.

Job `torch.matmul`, data (all optional):
    vram     declared need (default 2GiB)
    alloc    bytes to actually allocate (default: 90% of the declared need,
             since the CUDA caching allocator rounds up); above the declared
             need fails the job at once (job data is untrusted)
    steps    steps (default 10, at most HANDLER_MAX_STEPS); each runs
             `matmuls` products of n x n (default 20, at most
             HANDLER_MAX_MATMULS)
    n        matrix size (default 4096); its three bf16 matrices count
             within `alloc`, so n is bounded by the declaration
    host_s   seconds of host-side work per step (decoding, I/O), default 0,
             at most HANDLER_MAX_STEP_S
"""

from __future__ import annotations

import time
from typing import Any

from queues import UnrecoverableError

from .defaults import HANDLER_MAX_MATMULS, HANDLER_MAX_STEP_S, HANDLER_MAX_STEPS
from .handlers import JobContext, bounded, handler
from .units import format_bytes


def _declared(data: Any) -> Any:
    return (data or {}).get("vram", "2GiB")


@handler("torch.matmul", vram=_declared)
def torch_matmul(ctx: JobContext) -> dict[str, Any]:
    """Hold the declared VRAM and multiply bf16 matrices with progress."""
    import torch

    data = ctx.data or {}
    steps = max(int(bounded(data, "steps", 10, HANDLER_MAX_STEPS)), 1)
    matmuls = int(bounded(data, "matmuls", 20, HANDLER_MAX_MATMULS))
    host_s = bounded(data, "host_s", 0, HANDLER_MAX_STEP_S)
    alloc = ctx.allocation(data.get("alloc", int(ctx.declared_bytes * 0.9)))
    n = max(int(bounded(data, "n", 4096, alloc)), 1)
    element = 2  # bf16
    workspace = 3 * n * n * element
    if workspace > alloc:
        raise UnrecoverableError(
            f"n={n} needs {format_bytes(workspace)} for its matrices, more than "
            f"the {format_bytes(alloc)} this job may allocate"
        )
    device = torch.device(ctx.device.torch_device)
    stream = torch.cuda.Stream(device=device)
    started = time.perf_counter()
    with torch.cuda.stream(stream):
        ballast = torch.empty(
            max(alloc - workspace, 0), dtype=torch.uint8, device=device
        )
        ballast.fill_(1)  # touch it, so the memory is really resident
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        c = torch.empty(n, n, device=device, dtype=torch.bfloat16)
        held = ballast.numel() + 3 * n * n * element
        ctx.record_peak(held)
        for step in range(1, steps + 1):
            if ctx.should_stop():
                break
            for _ in range(matmuls):
                torch.matmul(a, b, out=c)
            stream.synchronize()
            if host_s:
                time.sleep(host_s)
            ctx.report_progress(round(100 * step / steps))
        checksum = float(c[0, :8].float().sum().item())
    del ballast, a, b, c
    torch.cuda.empty_cache()
    return {
        "steps": steps,
        "n": n,
        "allocated_bytes": held,
        "checksum": checksum,
        "seconds": round(time.perf_counter() - started, 3),
    }
