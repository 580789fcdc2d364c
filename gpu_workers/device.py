"""The GPU a worker process is pinned to, as its handlers and model loads see it."""

from __future__ import annotations

from dataclasses import dataclass

from .probe import SimulatedMemory


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


__all__ = ["Device"]
