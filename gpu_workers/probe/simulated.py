"""Simulated GPUs for machines without a driver (`sim:2x24GiB`): declared
devices, and the memory one process holds on them, checked like a real OOM."""

from __future__ import annotations

import os
import re
import threading

from ..exceptions import ConfigError, ProbeError, SimulatedOutOfMemory
from ..units import format_bytes, parse_bytes
from .base import GpuInfo, GpuSnapshot


class SimulatedMemory:
    """The memory of one simulated device as one process sees it: what the
    demo handler allocates, checked against capacity like a real OOM."""

    def __init__(self, capacity_bytes: int, context_bytes: int = 0) -> None:
        self.capacity_bytes = capacity_bytes
        self.context_bytes = context_bytes
        self.allocated_bytes = 0
        #: The part of `allocated_bytes` running jobs hold (the rest: resident
        #: weights), what makes the device read busy (SimulatedProbe.snapshot).
        self.job_bytes = 0
        self.peak_bytes = 0
        self.broken = False
        self._lock = threading.Lock()

    @property
    def used_bytes(self) -> int:
        """Allocations plus the CUDA context this process would hold."""
        return self.allocated_bytes + self.context_bytes

    def allocate(self, nbytes: int, job: bool = False) -> None:
        """Take `nbytes` (for a running job, or resident weights) or raise
        SimulatedOutOfMemory (worded like PyTorch's)."""
        with self._lock:
            free = self.capacity_bytes - self.used_bytes
            if nbytes > free:
                raise SimulatedOutOfMemory(
                    f"CUDA out of memory. Tried to allocate {format_bytes(nbytes)}. "
                    f"Simulated GPU has a total capacity of "
                    f"{format_bytes(self.capacity_bytes)} of which "
                    f"{format_bytes(free)} is free."
                )
            self.allocated_bytes += nbytes
            if job:
                self.job_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.used_bytes)

    def free(self, nbytes: int, job: bool = False) -> None:
        """Give `nbytes` back (a job's, or resident weights')."""
        with self._lock:
            self.allocated_bytes = max(0, self.allocated_bytes - nbytes)
            if job:
                self.job_bytes = max(0, self.job_bytes - nbytes)


_SIM_ITEM = re.compile(r"^\s*(?:(\d+)\s*[xX*]\s*)?(.+?)\s*$")


def parse_sim_spec(spec: str) -> list[int]:
    """`sim:2x24GiB` or `sim:24GiB,80GiB` (or `sim:1x24GiB,2x80GiB`) -> sizes."""
    if not spec.startswith("sim:"):
        raise ConfigError(f"not a simulated-GPU spec: {spec!r} (example: sim:2x24GiB)")
    sizes: list[int] = []
    for item in spec[4:].split(","):
        match = _SIM_ITEM.match(item)
        if not match or not match.group(2):
            raise ConfigError(f"bad simulated GPU {item!r} in {spec!r}")
        count = int(match.group(1) or 1)
        size = parse_bytes(match.group(2))
        if size <= 0 or count <= 0:
            raise ConfigError(
                f"simulated GPUs need a positive size and count: {item!r}"
            )
        sizes.extend([size] * count)
    if not sizes or len(sizes) > 64:
        raise ConfigError(f"{spec!r} must declare between 1 and 64 simulated GPUs")
    return sizes


class SimulatedProbe:
    """Declared devices for machines without a driver; always `simulated`.
    UUIDs carry the host name so several hosts' devices stay distinct."""

    kind = "simulated"
    simulated = True

    def __init__(self, spec: str, host: str = "local") -> None:
        self.spec = spec
        tag = re.sub(r"[^A-Za-z0-9-]", "-", host)[:40] or "local"
        self._infos = [
            GpuInfo(
                index=i,
                uuid=f"SIM-{tag}-{i}",
                name=f"Simulated GPU {format_bytes(size)}",
                pci_bus_id=f"SIM:{i:02x}:00.0",
                memory_total_bytes=size,
                simulated=True,
            )
            for i, size in enumerate(parse_sim_spec(spec))
        ]
        #: Memory of simulated devices held by this process, by UUID.
        self.memory: dict[str, SimulatedMemory] = {}

    def devices(self) -> list[GpuInfo]:
        """The declared devices."""
        return list(self._infos)

    def _info(self, uuid: str) -> GpuInfo:
        for info in self._infos:
            if info.uuid == uuid:
                return info
        raise ProbeError(f"no simulated GPU with UUID {uuid}")

    def open(self, uuid: str, context_bytes: int = 0) -> SimulatedMemory:
        """This process's memory on the device (as CUDA init would create it)."""
        if uuid not in self.memory:
            total = self._info(uuid).memory_total_bytes
            self.memory[uuid] = SimulatedMemory(total, context_bytes)
        return self.memory[uuid]

    def process_memory(self, uuid: str) -> dict[int, int | None]:
        """This process's simulated use (other processes are not visible)."""
        self._info(uuid)
        mem = self.memory.get(uuid)
        return {os.getpid(): mem.used_bytes} if mem is not None else {}

    def snapshot(self, uuid: str) -> GpuSnapshot:
        """A reading derived from this process's simulated allocations: busy
        (utilisation 100 %, 70 degrees C) while a job holds memory, else idle
        (0 %, 35 degrees C): a CUDA context or resident weights alone run no
        kernels, as an idle real GPU holding them reads 0 %."""
        info = self._info(uuid)
        used = sum(v or 0 for v in self.process_memory(uuid).values())
        mem = self.memory.get(uuid)
        busy = mem is not None and mem.job_bytes > 0
        return GpuSnapshot(
            index=info.index,
            uuid=uuid,
            name=info.name,
            pci_bus_id=info.pci_bus_id,
            simulated=True,
            memory_total_bytes=info.memory_total_bytes,
            memory_used_bytes=used,
            memory_free_bytes=info.memory_total_bytes - used,
            memory_reserved_bytes=0,
            utilization_gpu_pct=100 if busy else 0,
            utilization_memory_pct=int(100 * used / info.memory_total_bytes),
            temperature_c=70 if busy else 35,
            power_w=None,
            power_limit_w=None,
            sm_clock_mhz=None,
            processes=self.process_memory(uuid),
        )

    def close(self) -> None:
        """Nothing to release."""
