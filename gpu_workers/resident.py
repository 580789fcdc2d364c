"""What residency.py keeps per model on one GPU: the resident model and its
counts (the heartbeat's `models` and `model_counters`)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from . import defaults
from .clock import now_ms
from .exceptions import CudaOutOfMemory, ModelLoadError
from .models import Model
from .oom import is_cuda_oom

log = logging.getLogger("gpu_workers.residency")


@dataclass
class Resident:
    """One model on this GPU."""

    model: Model
    #: loading | resident | unloading
    state: str
    weights_bytes: int
    since_ms: int = field(default_factory=now_ms)
    last_used: float = field(default_factory=time.monotonic)
    last_used_ms: int = field(default_factory=now_ms)
    #: Job ids running on it (or waiting for its load).
    users: set[str] = field(default_factory=set)
    obj: Any = None
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    error: BaseException | None = None
    expected_s: float | None = None

    def summary(self, pinned: bool, wanted: bool) -> dict[str, Any]:
        """The model as a heartbeat lists it."""
        return {
            "name": self.model.name,
            "state": self.state,
            "weights_bytes": self.weights_bytes,
            "since_ms": self.since_ms,
            "last_used_ms": self.last_used_ms,
            "users": len(self.users),
            "pinned": pinned,
            "wanted": wanted,
        }


@dataclass
class Counters:
    """One model's counts on this GPU (heartbeat `model_counters`)."""

    loads: int = 0
    load_seconds_sum: float = 0.0
    buckets: list[int] = field(
        default_factory=lambda: [0] * (len(defaults.MODEL_LOAD_BUCKETS_S) + 1)
    )
    load_failures: int = 0
    load_ooms: int = 0
    evictions: int = 0
    jobs: int = 0

    def loaded(self, seconds: float) -> None:
        """Count a load of `seconds` (cumulative histogram buckets)."""
        self.loads += 1
        self.load_seconds_sum += seconds
        for i, bound in enumerate((*defaults.MODEL_LOAD_BUCKETS_S, float("inf"))):
            if seconds <= bound:
                self.buckets[i] += 1

    def as_dict(self) -> dict[str, Any]:
        """The heartbeat's form."""
        return {
            "loads": self.loads,
            "load_seconds_sum": round(self.load_seconds_sum, 3),
            "load_seconds_buckets": list(self.buckets),
            "load_failures": self.load_failures,
            "load_ooms": self.load_ooms,
            "evictions": self.evictions,
            "jobs": self.jobs,
        }


class LoadBackoff:
    """Models whose load failed on one GPU: not tried again there until a
    backoff passes (MODEL_LOAD_BACKOFF_S, doubling per failure to the max)."""

    def __init__(self, gpu: str) -> None:
        self.gpu = gpu
        #: model -> (monotonic time it may load again, failures, first line).
        self._until: dict[str, tuple[float, int, str]] = {}

    def active(self, name: str) -> bool:
        """Whether `name` still backs off here."""
        entry = self._until.get(name)
        return entry is not None and entry[0] > time.monotonic()

    def check(self, name: str) -> None:
        """ModelLoadError (retryable) while `name` backs off here."""
        entry = self._until.get(name)
        if entry is not None and entry[0] > time.monotonic():
            left = entry[0] - time.monotonic()
            raise ModelLoadError(
                f"model {name} is not loaded on GPU {self.gpu} for another "
                f"{left:.0f} s after {entry[1]} failed load(s): {entry[2]}"
            )

    def failed(self, name: str, error: BaseException) -> BaseException:
        """Back `name` off; the error its waiting jobs fail with (a CUDA OOM
        stays CudaOutOfMemory, so another GPU may take the job)."""
        _, failures, _ = self._until.get(name, (0.0, 0, ""))
        delay = min(
            defaults.MODEL_LOAD_BACKOFF_S * 2**failures,
            defaults.MODEL_LOAD_BACKOFF_MAX_S,
        )
        text = str(error).splitlines()[0][:300] if str(error) else repr(error)
        self._until[name] = (time.monotonic() + delay, failures + 1, text)
        log.warning("loading model %s on GPU %s failed: %s", name, self.gpu, text)
        out: BaseException = (
            CudaOutOfMemory()
            if is_cuda_oom(error)
            else ModelLoadError(f"loading model {name} failed: {text}")
        )
        out.__cause__ = error
        return out

    def clear(self, name: str) -> None:
        """A load of `name` succeeded."""
        self._until.pop(name, None)
