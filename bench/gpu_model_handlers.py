"""Models for bench/gpu_models_check.py (imported by its worker processes as
`bench.gpu_model_handlers`). On a real GPU (BULLPEN_CHECK_SIMULATE unset)
`check.a` and `check.b` are real `torch.nn.Module`s of 4 and 8 GiB of bf16
parameters on the device (gpu_workers.torch_handlers.torch_mlp), and
`check.oom` declares 1 GiB but its load allocates 1.2x the card, a real CUDA
OOM; simulated (BULLPEN_CHECK_SIMULATE=1) they are simulated models of the
same sizes. Jobs: `check.gen` (data: model, vram working memory)."""

from __future__ import annotations

import os
import time
from typing import Any

from gpu_workers.exceptions import SimulatedOutOfMemory
from gpu_workers.handlers import JobContext, handler
from gpu_workers.models import MODELS as REGISTRY
from gpu_workers.models import LoadContext, Model, from_data, sim_model
from gpu_workers.torch_handlers import torch_generate, torch_mlp

SIMULATE = os.environ.get("BULLPEN_CHECK_SIMULATE") == "1"
SIZES = {"check.a": 4, "check.b": 8}


def _oom_load(ctx: LoadContext) -> Any:
    if SIMULATE:
        raise SimulatedOutOfMemory("CUDA out of memory. Tried to allocate 30.0 GiB.")
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    return torch.empty(int(total * 1.2), dtype=torch.uint8, device="cuda:0")


if SIMULATE:
    for _name, _gib in SIZES.items():
        sim_model(_name, f"{_gib}GiB", 0.2)
else:
    for _name, _gib in SIZES.items():
        torch_mlp(_name, _gib)
REGISTRY.register(Model("check.oom", _oom_load, 1 << 30, None, 1))


@handler(
    "check.gen",
    vram=lambda data: (data or {}).get("vram", "1GiB"),
    model=from_data("model", allowed=[*SIZES, "check.oom"]),
)
def check_gen(ctx: JobContext) -> dict[str, Any]:
    """The torch model's forward passes (simulated: hold the working memory)."""
    if not SIMULATE:
        return torch_generate(ctx)
    ctx.sim_allocate(ctx.declared_bytes)
    time.sleep(0.05)
    return {"model": ctx.data["model"]}
