"""Reading GPUs: the `GpuProbe` protocol, NVML, simulated devices, CPU-only.

`make_probe("auto")` uses NVML when a driver answers and otherwise runs
CPU-only (no GPU workers) with a clear log line; simulated devices are used
only when asked for explicitly (`sim:2x24GiB`, `sim:24GiB,80GiB`) and are
marked `simulated` in every reading. GPUs are addressed by UUID, never by
index: a process pinned with CUDA_VISIBLE_DEVICES sees its GPU as device 0,
while NVML still sees them all.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from .exceptions import ConfigError, ProbeError, SimulatedOutOfMemory
from .units import format_bytes, parse_bytes

log = logging.getLogger("gpu_workers.probe")


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


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlProbe:
    """The real thing, through nvidia-ml-py. `nvml` is the pynvml module (or
    anything with its functions: tests pass one replaying recorded readings)."""

    kind = "nvml"
    simulated = False

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            try:
                import pynvml
            except ImportError as exc:
                raise ProbeError("nvidia-ml-py (pynvml) is not installed") from exc
            nvml = pynvml
        self.nvml = nvml
        self._lock = threading.Lock()
        try:
            nvml.nvmlInit()
            self.driver_version = _text(nvml.nvmlSystemGetDriverVersion())
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:  # noqa: BLE001 - NVMLError or a missing library
            raise ProbeError(f"NVML is not usable: {exc}") from exc
        self._handles: dict[str, Any] = {}
        self._infos: list[GpuInfo] = []
        for index in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            self._handles[uuid] = handle
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            self._infos.append(
                GpuInfo(
                    index=index,
                    uuid=uuid,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    pci_bus_id=_text(
                        self._optional(
                            lambda h=handle: nvml.nvmlDeviceGetPciInfo(h).busId
                        )
                        or ""
                    ),
                    memory_total_bytes=int(memory.total),
                )
            )
        self._xid: dict[str, tuple[int | None, int]] = {
            u: (None, 0) for u in self._handles
        }
        self._events = self._optional(self._register_xid_events)

    def _optional(self, read: Any) -> Any:
        """A reading the device may not support: None instead of NVMLError."""
        try:
            return read()
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends
            return None

    def _register_xid_events(self) -> Any:
        events = self.nvml.nvmlEventSetCreate()
        for handle in self._handles.values():
            self.nvml.nvmlDeviceRegisterEvents(
                handle, self.nvml.nvmlEventTypeXidCriticalError, events
            )
        return events

    def _drain_xid_events(self) -> None:
        """Collect pending XID events without waiting (timeout 0)."""
        if self._events is None:
            return
        for _ in range(100):
            try:
                data = self.nvml.nvmlEventSetWait_v2(self._events, 0)
            except Exception:  # noqa: BLE001 - NVML_ERROR_TIMEOUT: nothing pending
                return
            uuid = self._uuid_of(data.device)
            if uuid in self._xid:
                _, count = self._xid[uuid]
                self._xid[uuid] = (int(data.eventData), count + 1)

    def _uuid_of(self, handle: Any) -> str | None:
        try:
            return _text(self.nvml.nvmlDeviceGetUUID(handle))
        except Exception:  # noqa: BLE001
            return None

    def devices(self) -> list[GpuInfo]:
        """Every device NVML sees."""
        return list(self._infos)

    def _handle(self, uuid: str) -> Any:
        try:
            return self._handles[uuid]
        except KeyError:
            raise ProbeError(f"no GPU with UUID {uuid}") from None

    def process_memory(self, uuid: str) -> dict[int, int | None]:
        """NVML's compute processes on the device and their memory."""
        handle = self._handle(uuid)
        with self._lock:
            procs = (
                self._optional(
                    lambda: self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                )
                or []
            )
        result: dict[int, int | None] = {}
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            result[int(p.pid)] = None if used is None else int(used)
        return result

    def snapshot(self, uuid: str) -> GpuSnapshot:
        """Memory (v2 with reserved when the driver has it), utilisation,
        temperature, power, SM clock, ECC, XID and per-process memory."""
        nvml, handle = self.nvml, self._handle(uuid)
        info = next(i for i in self._infos if i.uuid == uuid)
        opt = self._optional
        with self._lock:
            try:
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            except Exception as exc:  # noqa: BLE001
                raise ProbeError(f"cannot read memory of GPU {uuid}: {exc}") from exc
            v2 = opt(
                lambda: nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
            )
            util = opt(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
            temp = opt(
                lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
            )
            power = opt(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
            limit = opt(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
            clock = opt(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
            ecc = opt(
                lambda: nvml.nvmlDeviceGetTotalEccErrors(
                    handle,
                    nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                    nvml.NVML_VOLATILE_ECC,
                )
            )
            self._drain_xid_events()
        xid_last, xid_count = self._xid[uuid]
        return GpuSnapshot(
            index=info.index,
            uuid=uuid,
            name=info.name,
            pci_bus_id=info.pci_bus_id,
            simulated=False,
            memory_total_bytes=int(memory.total),
            memory_used_bytes=int(memory.used),
            memory_free_bytes=int(memory.free),
            memory_reserved_bytes=None if v2 is None else int(v2.reserved),
            utilization_gpu_pct=None if util is None else int(util.gpu),
            utilization_memory_pct=None if util is None else int(util.memory),
            temperature_c=None if temp is None else int(temp),
            power_w=None if power is None else power / 1000,
            power_limit_w=None if limit is None else limit / 1000,
            sm_clock_mhz=None if clock is None else int(clock),
            ecc_uncorrected_volatile=None if ecc is None else int(ecc),
            xid_last=xid_last,
            xid_count=xid_count if self._events is not None else None,
            processes=self.process_memory(uuid),
        )

    def close(self) -> None:
        """Shut NVML down."""
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


class SimulatedMemory:
    """The memory of one simulated device as one process sees it: what the
    demo handler allocates, checked against capacity like a real OOM."""

    def __init__(self, capacity_bytes: int, context_bytes: int = 0) -> None:
        self.capacity_bytes = capacity_bytes
        self.context_bytes = context_bytes
        self.allocated_bytes = 0
        self.peak_bytes = 0
        self.broken = False
        self._lock = threading.Lock()

    @property
    def used_bytes(self) -> int:
        """Allocations plus the CUDA context this process would hold."""
        return self.allocated_bytes + self.context_bytes

    def allocate(self, nbytes: int) -> None:
        """Take `nbytes` or raise SimulatedOutOfMemory (worded like PyTorch's)."""
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
            self.peak_bytes = max(self.peak_bytes, self.used_bytes)

    def free(self, nbytes: int) -> None:
        """Give `nbytes` back."""
        with self._lock:
            self.allocated_bytes = max(0, self.allocated_bytes - nbytes)


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
        """A reading derived from this process's simulated allocations."""
        info = self._info(uuid)
        used = sum(v or 0 for v in self.process_memory(uuid).values())
        busy = used > 0
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


def make_probe(spec: str = "auto", host: str = "local", nvml: Any = None) -> GpuProbe:
    """The probe a `BULLPEN_GPUS` value asks for: `auto` (NVML, else CPU-only),
    `nvml` (same, but says it wanted a driver), `sim:...`, or `none`/`cpu`."""
    spec = (spec or "auto").strip()
    if spec.startswith("sim:"):
        probe = SimulatedProbe(spec, host)
        log.info(
            "GPU probe: %d SIMULATED device(s) from %s", len(probe.devices()), spec
        )
        return probe
    if spec in ("none", "cpu"):
        log.warning(
            "GPU probe: CPU-only mode (BULLPEN_GPUS=%s): no GPU workers will start",
            spec,
        )
        return CpuOnlyProbe("configured")
    if spec not in ("auto", "nvml"):
        raise ConfigError(
            f"BULLPEN_GPUS must be auto, nvml, none or sim:NxSIZE, not {spec!r}"
        )
    try:
        real = NvmlProbe(nvml)
    except ProbeError as exc:
        log.warning(
            "GPU probe: no NVIDIA driver (%s); running CPU-only: no GPU "
            "workers will start. Set BULLPEN_GPUS=sim:2x24GiB to simulate "
            "devices.",
            exc,
        )
        return CpuOnlyProbe(str(exc))
    if not real.devices():
        log.warning("GPU probe: NVML answers but sees no GPU; running CPU-only")
        return CpuOnlyProbe("NVML sees no GPU")
    log.info(
        "GPU probe: NVML driver %s, %d device(s)",
        real.driver_version,
        len(real.devices()),
    )
    return real
