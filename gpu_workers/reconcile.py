"""What a supervisor wants running, from the desired counts and its plan:
one process per (queue, GPU), or with process_per_gpu one per GPU serving
the queues whose desired `workers` count covers that GPU (the first N GPUs
of the queue's plan)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .children import GPU_PROCESS, Child
from .config import QueueConfig, SupervisorConfig
from .planning import Plan
from .probe import GpuInfo


@dataclass
class Want:
    """One wanted process: its queues, GPU, budget and slots by queue key."""

    gpu: GpuInfo
    budget_bytes: int
    queues: list[QueueConfig] = field(default_factory=list)
    slots: dict[str, int] = field(default_factory=dict)
    per_gpu: bool = False

    @property
    def keys(self) -> tuple[str, ...]:
        """Its queues' keys, in configured order."""
        return tuple(q.key for q in self.queues)

    def child(self) -> Child:
        """A new child (stopped) for it."""
        queues = tuple(self.queues) if self.per_gpu else ()
        return Child(self.queues[0], self.gpu, self.budget_bytes, queues=queues)

    def regroup(self, child: Child) -> None:
        """Make `child` serve this want's queues (its next start)."""
        child.queue = self.queues[0]
        child.budget_bytes = self.budget_bytes
        if self.per_gpu:
            child.queues = tuple(self.queues)


def wanted_processes(
    config: SupervisorConfig,
    plan: Plan,
    desired: dict[str, dict[str, int]],
) -> dict[tuple[str, str], Want]:
    """The processes wanted now, keyed as the supervisor's children."""
    out: dict[tuple[str, str], Want] = {}
    for q in config.queues:
        d = desired.get(q.key, {})
        count = min(d.get("workers", 0), len(plan[q.key]))
        slots = d.get("slots") or q.slots
        for gpu, budget in plan[q.key][:count]:
            per_gpu = config.process_per_gpu
            slot = (GPU_PROCESS if per_gpu else q.key, gpu.uuid)
            want = out.setdefault(slot, Want(gpu, budget, per_gpu=per_gpu))
            want.queues.append(q)
            want.slots[q.key] = slots
    return out


def child_keys(child: Child) -> tuple[str, ...]:
    """The keys of the queues a child serves."""
    return tuple(q.key for q in child.served)
