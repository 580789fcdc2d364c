"""A real PyTorch handler: allocates the declared VRAM on the pinned GPU and
runs matrix multiplications step by step. torch is imported only inside the
handler, so worker processes that never run it start without it.

Job `torch.matmul`, data (all optional):
    vram     declared need (default 2GiB)
    alloc    bytes to actually allocate (default: 90% of the declared need,
             since the CUDA caching allocator rounds up); more than the GPU
             has raises torch.OutOfMemoryError
    steps    steps (default 10); each runs `matmuls` products of n x n
    n        matrix size (default 4096), matmuls (default 20)
    host_s   seconds of host-side work per step (decoding, I/O), default 0
"""

from __future__ import annotations

import time
from typing import Any

from .handlers import JobContext, handler
from .units import parse_bytes


def _declared(data: Any) -> Any:
    return (data or {}).get("vram", "2GiB")


@handler("torch.matmul", vram=_declared)
def torch_matmul(ctx: JobContext) -> dict[str, Any]:
    """Hold the declared VRAM and multiply bf16 matrices with progress."""
    import torch

    data = ctx.data or {}
    steps = max(int(data.get("steps", 10)), 1)
    n = int(data.get("n", 4096))
    matmuls = int(data.get("matmuls", 20))
    host_s = float(data.get("host_s", 0))
    alloc = parse_bytes(data.get("alloc", int(ctx.declared_bytes * 0.9)))
    device = torch.device(ctx.device.torch_device)
    element = 2  # bf16
    workspace = 3 * n * n * element
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
