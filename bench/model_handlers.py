"""Handlers and simulated models for bench/models.py (imported by the
benchmark's worker processes as `bench.model_handlers`).

Three models like an image service's: `sdxl` (7 GiB of weights, 5 s to
load), `flux` (24 GiB, 15 s) and `video` (40 GiB, 30 s). Every time is
multiplied by BULLPEN_BENCH_TIME_SCALE (the benchmark sets it and prints it).

- `bench.gen` (modes b and c): the job names its model; its `vram` is its
  working memory beside the resident weights.
- `bench.perjob` (mode a, today's way): no model declared; the job declares
  weights + working memory and loads the weights itself, every time.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from gpu_workers.handlers import JobContext, bounded, handler
from gpu_workers.models import SIM_TIME_SCALE, from_data, sim_model

SCALE = float(os.environ.get("BULLPEN_BENCH_TIME_SCALE", "1"))
SIM_TIME_SCALE["factor"] = SCALE
#: name -> (weights GiB, load seconds before scaling)
MODELS = {"sdxl": (7, 5.0), "flux": (24, 15.0), "video": (40, 30.0)}
GiB = 2**30

for _name, (_gib, _load_s) in MODELS.items():
    sim_model(_name, f"{_gib}GiB", _load_s)


def _working(data: Any) -> int:
    return int(bounded(data, "working_gib", 2, 64) * GiB)


@handler("bench.gen", vram=_working, model=from_data("model", allowed=list(MODELS)))
async def generate(ctx: JobContext) -> dict[str, Any]:
    """Hold the working memory for the job's run time on its resident model."""
    ctx.sim_allocate(ctx.declared_bytes)
    await asyncio.sleep(bounded(ctx.data, "run_s", 1, 600) * SCALE)
    return {"model": ctx.data["model"]}


def _weights_and_working(data: Any) -> int:
    name = (data or {}).get("model")
    weights = MODELS[name][0] * GiB if name in MODELS else 0
    return weights + _working(data)


@handler("bench.perjob", vram=_weights_and_working)
async def per_job(ctx: JobContext) -> dict[str, Any]:
    """Today's way: load the weights (hold them, wait the load time), run,
    free everything."""
    weights_gib, load_s = MODELS[ctx.data["model"]]
    ctx.sim_allocate(weights_gib * GiB)
    await asyncio.sleep(load_s * SCALE)
    ctx.sim_allocate(ctx.declared_bytes - weights_gib * GiB)
    await asyncio.sleep(bounded(ctx.data, "run_s", 1, 600) * SCALE)
    return {"model": ctx.data["model"], "load_s": load_s * SCALE}
