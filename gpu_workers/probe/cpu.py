"""`CpuOnlyProbe`: no GPUs (no driver, or `BULLPEN_GPUS=none`)."""

from __future__ import annotations

from ..exceptions import ProbeError
from .base import GpuInfo, GpuSnapshot


class CpuOnlyProbe:
    """No devices: the supervisor starts no GPU workers."""

    kind = "cpu"
    simulated = False

    def __init__(self, reason: str = "") -> None:
        self.reason = reason

    def devices(self) -> list[GpuInfo]:
        """None."""
        return []

    def snapshot(self, uuid: str) -> GpuSnapshot:
        """There is nothing to read."""
        raise ProbeError("CPU-only mode has no GPUs")

    def process_memory(self, uuid: str) -> dict[int, int | None]:
        """There is nothing to read."""
        raise ProbeError("CPU-only mode has no GPUs")

    def close(self) -> None:
        """Nothing to release."""
