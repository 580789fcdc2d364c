"""Durable adds: how many replicas must confirm an add before it returns.

Redis replicates asynchronously, so an add the primary has acknowledged can
still be lost when the primary dies before a replica got it (a Sentinel
failover promotes a replica that never saw the job). With a `Durability`, a
queue sends `WAIT replicas timeout` right after each add on the same
connection (one pipeline), and raises `NotDurable` when fewer replicas
confirmed in time. This is a Bullpen extension: Node BullMQ has no such
option (docs/bullmq-compat.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Durability:
    """Adds return only once `replicas` replicas have the job, waiting at most
    `timeout_ms` for them; otherwise `NotDurable` is raised (the job stays)."""

    replicas: int = 1
    timeout_ms: int = 1000

    def __post_init__(self) -> None:
        for name in ("replicas", "timeout_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                # WAIT's timeout 0 would block for ever; 0 replicas asks nothing.
                raise ValueError(f"Durability {name} must be an integer >= 1")

    @property
    def wait_s(self) -> float:
        """The longest a WAIT blocks, in seconds."""
        return self.timeout_ms / 1000
