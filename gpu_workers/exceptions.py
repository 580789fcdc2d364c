"""Errors raised by the GPU worker layer.

GpuWorkerError
 ├── ConfigError            (also a ValueError)
 │    └── UnitError
 ├── ValidationError        (also a ValueError)
 ├── ProbeError
 ├── HandlerNotFound        (also an UnrecoverableError: fails the job at once)
 ├── JobTooLarge            (also an UnrecoverableError)
 ├── JobCancelled           (also an UnrecoverableError)
 ├── CudaOutOfMemory        (retried per the job's attempts/backoff)
 ├── SimulatedOutOfMemory   (what the simulated device raises; a CUDA OOM)
 └── AdmissionInvariantError
"""

from __future__ import annotations

from queues import UnrecoverableError

#: failedReason of a job that ran out of GPU memory.
OOM_REASON = "CUDA out of memory"
#: failedReason of a job cancelled through request_cancel().
CANCEL_REASON = "cancelled by operator"


class GpuWorkerError(Exception):
    """Base class of every error of the GPU worker layer."""


class ConfigError(GpuWorkerError, ValueError):
    """Raised when settings handed to gpu_workers are invalid."""


class UnitError(ConfigError):
    """Raised when a byte size such as "10GiB" cannot be parsed."""


class ValidationError(GpuWorkerError, ValueError):
    """Raised when a read/write API call (set_desired, request_cancel) is invalid."""


class ProbeError(GpuWorkerError):
    """Raised when a GPU probe cannot read a device (NVML missing or failing)."""


class HandlerNotFound(GpuWorkerError, UnrecoverableError):
    """Raised when a job's name has no registered handler."""


class JobTooLarge(GpuWorkerError, UnrecoverableError):
    """Raised when a job declares more VRAM than the worker's whole budget."""


class JobCancelled(GpuWorkerError, UnrecoverableError):
    """Raised when an operator cancelled a running job."""

    def __init__(self, reason: str = CANCEL_REASON) -> None:
        super().__init__(reason)


class CudaOutOfMemory(GpuWorkerError):
    """Raised in place of any CUDA OOM so the job's reason is exactly OOM_REASON."""

    def __init__(self) -> None:
        super().__init__(OOM_REASON)


class SimulatedOutOfMemory(GpuWorkerError):
    """Raised when a simulated allocation exceeds the simulated device."""


class AdmissionInvariantError(GpuWorkerError):
    """Raised if committed VRAM would exceed the budget (a bug, never expected)."""


class ModelLoadError(GpuWorkerError):
    """A model's load raised (or still backs off on this GPU after one):
    fails the job with that error; attempts and backoff apply."""
