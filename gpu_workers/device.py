"""The GPU a worker process is pinned to, as its handlers and model loads see it."""

from __future__ import annotations

from dataclasses import dataclass

from .exceptions import ProbeError
from .probe import GpuProbe, SimulatedMemory, SimulatedProbe


@dataclass
class Device:
    """The GPU a worker process is pinned to. With CUDA_VISIBLE_DEVICES=<uuid>
    the process sees it as CUDA device 0 (`torch_device`)."""

    uuid: str
    index: int
    name: str
    memory_total_bytes: int
    simulated: bool
    #: This process's simulated memory (simulated devices only).
    memory: SimulatedMemory | None = None
    torch_device: str = "cuda:0"


def open_device(probe: GpuProbe, uuid: str, context_bytes: int) -> Device:
    """The GPU `uuid` as the probe sees it, for one worker process (simulated:
    opened for it, with one CUDA context)."""
    info = next((d for d in probe.devices() if d.uuid == uuid), None)
    if info is None:
        raise ProbeError(f"GPU {uuid} is not visible to the probe")
    memory = None
    if isinstance(probe, SimulatedProbe):
        memory = probe.open(uuid, context_bytes)
    return Device(
        uuid=info.uuid,
        index=info.index,
        name=info.name,
        memory_total_bytes=info.memory_total_bytes,
        simulated=info.simulated,
        memory=memory,
    )


__all__ = ["Device", "open_device"]
