"""`NvmlProbe`: real NVIDIA GPUs through nvidia-ml-py (pynvml)."""

from __future__ import annotations

import threading
from typing import Any

from ..exceptions import ProbeError
from .base import GpuInfo, GpuSnapshot


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
