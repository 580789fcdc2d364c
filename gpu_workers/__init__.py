"""Managed GPU worker processes: VRAM admission, supervision, health.

Built on `queues`; never imports Django, so a worker process starts fast.

- `handlers`: `@handler("txt2img", vram="10GiB")` and the handler context
- `probe`: the `GpuProbe` protocol, NVML, simulated devices, CPU-only mode
- `admission`, `worker`: VRAM budgets and the `GpuWorker` that admits by them
- `supervisor`: worker processes per GPU and queue, restarts, drain, scaling
- `registry`: heartbeats in Redis and the `Fleet` read/write API
"""

from __future__ import annotations

from .config import QueueConfig, SupervisorConfig, parse_workers
from .handlers import JobContext, handler
from .registry import Fleet

__all__ = [
    "Fleet",
    "JobContext",
    "QueueConfig",
    "SupervisorConfig",
    "handler",
    "parse_workers",
]
