"""Real PyTorch handlers. `torch.matmul` allocates the declared VRAM on the
pinned GPU and runs matrix multiplications step by step; `torch.generate`
runs a batch through a resident `torch.nn.Module` model (`torch_mlp`, e.g.
the declared `torch.mlp`). torch is imported only inside the handlers and
loads, so worker processes that never run them start without it.

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
from .models import MODELS, LoadContext, Model, ModelRegistry, from_data
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


# --- a resident model (docs/models.md) -----------------------------------------------
#: Width of the square bf16 layers of `torch_mlp` models.
MLP_WIDTH = 4096


def torch_mlp(
    name: str, gib: float, registry: ModelRegistry = MODELS, load_seconds: float = 2
) -> Model:
    """Declare a model that is a real `torch.nn.Module`: square bf16 linear
    layers of about `gib` GiB of parameters (they stand for weights; nothing
    is downloaded), built on the worker's GPU and kept there across jobs."""
    layers = max(1, round(gib * 2**30 / (MLP_WIDTH * MLP_WIDTH * 2)))

    def load(ctx: LoadContext) -> Any:
        import torch

        device = torch.device(ctx.device.torch_device)
        module = torch.nn.Sequential(
            *(
                torch.nn.Linear(
                    MLP_WIDTH,
                    MLP_WIDTH,
                    bias=False,
                    device=device,
                    dtype=torch.bfloat16,
                )
                for _ in range(layers)
            )
        )
        module.eval()
        return module

    load.__qualname__ = f"torch_mlp.{name}"
    weights = layers * MLP_WIDTH * MLP_WIDTH * 2
    return registry.register(Model(name, load, weights, None, load_seconds))


torch_mlp("torch.mlp", 2)


@handler(
    "torch.generate",
    vram=lambda data: (data or {}).get("vram", "1GiB"),
    model=from_data("model", default="torch.mlp"),
)
def torch_generate(ctx: JobContext) -> dict[str, Any]:
    """Run a batch through the job's resident `torch_mlp` model `steps` times.
    Data (optional): model, vram (working memory, default 1GiB), batch
    (rows, default 256, bounded by the working memory), steps (default 4)."""
    import torch

    data = ctx.data or {}
    steps = max(int(bounded(data, "steps", 4, HANDLER_MAX_STEPS)), 1)
    row = MLP_WIDTH * 2 * 3  # input, output and one intermediate, bf16
    batch = max(int(bounded(data, "batch", 256, max(ctx.declared_bytes // row, 1))), 1)
    device = torch.device(ctx.device.torch_device)
    with torch.no_grad():
        x = torch.randn(batch, MLP_WIDTH, device=device, dtype=torch.bfloat16)
        for step in range(1, steps + 1):
            if ctx.should_stop():
                break
            y = ctx.model(x)
            torch.cuda.synchronize(device)
            ctx.report_progress(round(100 * step / steps))
        checksum = float(y[0, :8].float().sum().item())
    ctx.record_peak(batch * row)
    del x, y
    return {"steps": steps, "batch": batch, "checksum": checksum}
