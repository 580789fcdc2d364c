"""What the queue workers of one GPU process share (gpu_process.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .admission import VramAdmission
from .device import Device
from .model_upkeep import ModelUpkeep
from .residency import Residency


@dataclass
class SharedGpu:
    """What the queue workers of one GPU process share (gpu_process.py): one
    device, one admission (the whole budget), one residency and its upkeep,
    and the process as its heartbeats name it ({"pid", "queues"})."""

    device: Device
    admission: VramAdmission
    residency: Residency
    models: ModelUpkeep
    process: dict[str, Any]
