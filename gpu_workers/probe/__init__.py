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
from typing import Any

from ..exceptions import ConfigError, ProbeError
from .base import GpuInfo, GpuProbe, GpuSnapshot
from .cpu import CpuOnlyProbe
from .nvml import NvmlProbe
from .simulated import SimulatedMemory, SimulatedProbe, parse_sim_spec

__all__ = [
    "CpuOnlyProbe",
    "GpuInfo",
    "GpuProbe",
    "GpuSnapshot",
    "NvmlProbe",
    "SimulatedMemory",
    "SimulatedProbe",
    "make_probe",
    "parse_sim_spec",
]

log = logging.getLogger("gpu_workers.probe")


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
