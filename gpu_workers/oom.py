"""Telling a CUDA out-of-memory error apart, and checking after one that
CUDA still works (a broken CUDA state means restarting the process)."""

from __future__ import annotations

import logging
import sys

from .device import Device
from .exceptions import SimulatedOutOfMemory

log = logging.getLogger("gpu_workers.worker")


def is_cuda_oom(exc: BaseException | None) -> bool:
    """torch.OutOfMemoryError, a simulated OOM, or any error (or its cause)
    whose message says CUDA ran out of memory."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, SimulatedOutOfMemory):
            return True
        if type(exc).__name__ == "OutOfMemoryError" and type(exc).__module__.startswith(
            "torch"
        ):
            return True
        text = str(exc)
        if "CUDA out of memory" in text or "CUDA error: out of memory" in text:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def cuda_self_check(device: Device) -> bool:
    """After an OOM: free cached blocks and run a tiny kernel; False = broken."""
    if device.memory is not None:
        return not device.memory.broken
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return True
    try:
        torch.cuda.empty_cache()
        x = torch.ones(256, device=device.torch_device)
        ok = float(x.sum().item()) == 256.0
        torch.cuda.synchronize()
        del x
        return ok
    except Exception:  # noqa: BLE001 - any failure here means CUDA is unusable
        log.exception("CUDA self-check failed")
        return False
