"""What every GPU probe shares: the readings (`GpuInfo`, `GpuSnapshot`) and
the `GpuProbe` protocol its implementations follow."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class GpuInfo:
    """What does not change about a device."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    memory_total_bytes: int
    simulated: bool = False


@dataclass
class GpuSnapshot:
    """One reading of a device; fields a device cannot report are None."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    simulated: bool
    memory_total_bytes: int
    memory_used_bytes: int
    memory_free_bytes: int
    #: Driver-reserved memory (NVML memory v2); v2 `used` excludes it.
    memory_reserved_bytes: int | None = None
    utilization_gpu_pct: int | None = None
    utilization_memory_pct: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    ecc_uncorrected_volatile: int | None = None
    xid_last: int | None = None
    xid_count: int | None = None
    #: pid -> bytes used on this device (None where the driver hides it).
    processes: dict[int, int | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (pids become strings, as JSON keys must)."""
        data = asdict(self)
        data["processes"] = {str(pid): used for pid, used in self.processes.items()}
        return data


@runtime_checkable
class GpuProbe(Protocol):
    """Reads devices. Contract: never raises for a missing optional reading
    (it is None); raises ProbeError only when a device cannot be read at all."""

    kind: str
    simulated: bool

    def devices(self) -> list[GpuInfo]:
        """Every device, in index order."""
        ...

    def snapshot(self, uuid: str) -> GpuSnapshot:
        """A fresh reading of one device."""
        ...

    def process_memory(self, uuid: str) -> dict[int, int | None]:
        """Bytes used on the device per process id."""
        ...

    def close(self) -> None:
        """Release the library."""
        ...
