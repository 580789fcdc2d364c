"""A stand-in for the pynvml module that replays recorded readings
(tests/fixtures/nvml_*.json), injected into NvmlProbe(nvml=...)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpu_workers.device import Device

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: The UUID of nvml_h200.json's GPU (a placeholder: the doc elided it).
H200_UUID = "GPU-00000000-0000-0000-0000-0000000000h2"


def h200_device() -> Device:
    """nvml_h200.json's GPU as a worker sees it (real, not simulated)."""
    return Device(
        uuid=H200_UUID,
        index=0,
        name="NVIDIA H200",
        memory_total_bytes=140 * 2**30,
        simulated=False,
    )


class NVMLError(Exception):
    """pynvml's error: `value` is the NVML return code."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


NOT_SUPPORTED = 3
DRIVER_NOT_LOADED = 9
TIMEOUT = 10
FUNCTION_NOT_FOUND = 13


class FakeNvml:
    """The pynvml functions NvmlProbe calls, answering from a fixture."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    nvmlMemory_v2 = 0x02000028
    nvmlEventTypeXidCriticalError = 0x8

    def __init__(self, fixture: str | dict[str, Any], fail_init: bool = False) -> None:
        if isinstance(fixture, str):
            fixture = json.loads((FIXTURES / fixture).read_text())
        self.data = fixture
        self.fail_init = fail_init
        self.devices = fixture["devices"]
        self.calls: list[str] = []
        self.xid_events: list[tuple[int, int]] = []  # (device index, xid)

    # --- lifecycle
    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.fail_init:
            raise NVMLError(DRIVER_NOT_LOADED)

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self.data["driver_version"])

    # --- devices
    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        return self.devices[index]

    def nvmlDeviceGetUUID(self, h: dict[str, Any]) -> bytes:
        return h["uuid"].encode()  # older pynvml returns bytes

    def nvmlDeviceGetName(self, h: dict[str, Any]) -> str:
        return str(h["name"])

    def nvmlDeviceGetPciInfo(self, h: dict[str, Any]) -> Any:
        return SimpleNamespace(busId=h["pci_bus_id"].encode())

    def nvmlDeviceGetMemoryInfo(
        self, h: dict[str, Any], version: int | None = None
    ) -> Any:
        if version:
            if h.get("memory_v2") is None:
                raise NVMLError(FUNCTION_NOT_FOUND)
            return SimpleNamespace(**h["memory_v2"])
        return SimpleNamespace(**h["memory"])

    def _get(self, h: dict[str, Any], key: str) -> Any:
        if h.get(key) is None:
            raise NVMLError(NOT_SUPPORTED)
        return h[key]

    def nvmlDeviceGetUtilizationRates(self, h: dict[str, Any]) -> Any:
        return SimpleNamespace(**self._get(h, "utilization"))

    def nvmlDeviceGetTemperature(self, h: dict[str, Any], sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return int(self._get(h, "temperature_gpu"))

    def nvmlDeviceGetPowerUsage(self, h: dict[str, Any]) -> int:
        return int(self._get(h, "power_mw"))

    def nvmlDeviceGetEnforcedPowerLimit(self, h: dict[str, Any]) -> int:
        return int(self._get(h, "power_limit_mw"))

    def nvmlDeviceGetClockInfo(self, h: dict[str, Any], clock: int) -> int:
        assert clock == self.NVML_CLOCK_SM
        return int(self._get(h, "sm_clock_mhz"))

    def nvmlDeviceGetTotalEccErrors(
        self, h: dict[str, Any], kind: int, counter: int
    ) -> int:
        return int(self._get(h, "ecc_uncorrected_volatile"))

    def nvmlDeviceGetComputeRunningProcesses(self, h: dict[str, Any]) -> list[Any]:
        return [
            SimpleNamespace(pid=p["pid"], usedGpuMemory=p["used"])
            for p in h["processes"]
        ]

    # --- XID events
    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceRegisterEvents(
        self, h: dict[str, Any], kinds: int, events: str
    ) -> None:
        assert kinds == self.nvmlEventTypeXidCriticalError

    def nvmlEventSetWait_v2(self, events: str, timeout_ms: int) -> Any:
        if not self.xid_events:
            raise NVMLError(TIMEOUT)
        index, xid = self.xid_events.pop(0)
        return SimpleNamespace(
            device=self.devices[index],
            eventData=xid,
            eventType=self.nvmlEventTypeXidCriticalError,
        )

    # --- test controls
    def set_process_memory(self, index: int, pid: int, used: int | None) -> None:
        """Make a process appear on device `index` with `used` bytes."""
        procs = [p for p in self.devices[index]["processes"] if p["pid"] != pid]
        procs.append({"pid": pid, "used": used})
        self.devices[index]["processes"] = procs
