"""Managed GPU worker processes: VRAM admission, supervision, health.

Built on `queues`; never imports Django, so a worker process starts fast.

- `handlers`: `@handler("txt2img", vram="10GiB")` and the handler context
- `models`: `@model("sdxl", weights="7GiB")`, `from_data`, simulated models;
  `residency` keeps them on a GPU across jobs (weights + working memory under
  the budget), `placement` claims jobs where their model is warm, `pools`
  plans which GPUs keep which model, `gpu_process` one process per GPU
- `probe`: the `GpuProbe` protocol, NVML, simulated devices, CPU-only mode
- `admission`, `worker`: VRAM budgets and the `GpuWorker` that admits by them;
  `upkeep` its heartbeat/control/peak loops, `oom` CUDA OOMs and self-checks
- `supervisor`: worker processes per GPU and queue, restarts, drain, scaling;
  `children` the processes it manages, `desired` the counts it converges to
- `heartbeat`: the records workers and supervisors write to Redis
- `fleet`: the `Fleet` read model over them and its small write API
- `waiting`: why a job is not running yet (queue state, workers, VRAM), for
  the dashboard's pages and its API
"""

from __future__ import annotations

from .config import QueueConfig, SupervisorConfig, parse_workers
from .fleet import Fleet
from .handlers import JobContext, handler
from .models import from_data, model

__all__ = [
    "Fleet",
    "JobContext",
    "QueueConfig",
    "SupervisorConfig",
    "from_data",
    "handler",
    "model",
    "parse_workers",
]
