"""Claim policies: how many more jobs a worker may claim now.

A worker asks its policy before each claim, and before each batch of
finishes that also claims. The default policy is its `concurrency`; one
given as `claim_policy=` decides instead, as BullMQ's `limiter` option gates
a worker (gpu_workers/admission.py admits by VRAM budget).

The worker re-asks whenever one of its jobs ends. A policy whose capacity
grows otherwise (budget freed while jobs still run, a new slot count) calls
the wake it was bound to, and the worker re-asks at once.

A policy may also choose WHICH job comes next (`ClaimGate`): it defines
`async def before_claim(self) -> float`, which the worker awaits right
before each claim of new jobs. 0: claim now (the policy may have moved the
job it wants to the head of the wait list); more than 0: claim nothing, wait
that many seconds or until woken, then ask again. Such a worker claims one
job per claim and none in the finish script, so every job it takes went
through the hook (gpu_workers/placement.py prefers jobs whose model is
resident on the worker's GPU this way). A hook that raises a recoverable
(connection) error is retried as a failed claim is; it should rather log
and answer 0, so that it never stops a worker claiming.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

#: The worker's wake: makes its loop re-ask the policy.
Wake = Callable[[], None]


@runtime_checkable
class ClaimPolicy(Protocol):
    """Decides how many jobs one worker claims."""

    def capacity(self, claimed: int) -> int:
        """How many more jobs may be claimed now, the worker running
        `claimed` (claimed and not ended); 0 or less: none."""
        ...

    def bind(self, wake: Wake) -> None:
        """Take the worker's wake, to call once capacity may have grown."""
        ...


@runtime_checkable
class ClaimGate(Protocol):
    """A claim policy that also picks the next job (optional)."""

    async def before_claim(self) -> float:
        """Called right before each claim: 0 = claim now; > 0 = claim
        nothing, wait that many seconds (or until woken), ask again."""
        ...


class Concurrency:
    """The default policy: at most `limit` jobs at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def capacity(self, claimed: int) -> int:
        """The free slots out of `limit`."""
        return self.limit - claimed

    def bind(self, wake: Wake) -> None:
        """Nothing to wake for: a slot frees only when a job ends."""
