"""VRAM admission: a worker process's budget and what its running jobs commit.

The invariant: the declared needs of admitted jobs (with a model: their
working memory) plus what resident models hold (`held`: weights, loading or
unloading ones included, and any VRAM an unload did not give back) never
exceed the budget. residency.py decides what models hold.

Claims are gated one at a time: a job is claimed only with a free slot and
some uncommitted budget, and while a claimed job waits for budget (holding
its slot) nothing else is claimed, so a large job cannot be starved by a
stream of small ones.

`VramAdmission` is the GPU worker's claim policy (queues.worker.ClaimPolicy):
its queue worker asks it before each claim, and it wakes the worker when
capacity grows while jobs still run (a job admitted, budget released, more
slots).

One process serving several queues on one GPU (gpu_process.py) shares one
admission: each queue's worker claims through its own `QueueClaims`
(`view(slots)`), which keeps that queue's slots and holds every queue's
claims while a claimed job of ANY of them still waits for budget. Job ids
are keyed per view (`key()`), since two queues may both have a job "1".
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

from .exceptions import AdmissionInvariantError, ConfigError, JobTooLarge
from .units import format_bytes


def _nothing() -> None:
    """The wake of a policy bound to no worker."""


def compute_budget(
    total_bytes: int,
    reserve_bytes: int,
    context_bytes: int,
    margin_bytes: int,
    processes: int = 1,
    share: float = 1.0,
) -> int:
    """One worker process's budget on a GPU: (total - driver reserve - margin -
    one CUDA context per process on the GPU) x this process's share."""
    if processes < 1:
        raise ConfigError("a GPU budget needs at least one process")
    if not 0 < share <= 1:
        raise ConfigError(f"a VRAM share must be in (0, 1], not {share}")
    usable = total_bytes - reserve_bytes - margin_bytes - context_bytes * processes
    return max(0, math.floor(usable * share))


def too_large_reason(need: int, budget: int, gpu: str) -> str:
    """Why a job can never run here, naming both numbers."""
    return (
        f"job needs {format_bytes(need)} ({need} bytes) of VRAM, more than this "
        f"worker's whole budget of {format_bytes(budget)} ({budget} bytes) on "
        f"GPU {gpu}"
    )


class VramAdmission:
    """Slots and VRAM budget of one worker process (its event loop only)."""

    def __init__(self, budget_bytes: int, slots: int, gpu: str = "?") -> None:
        if budget_bytes < 0:
            raise ConfigError("a VRAM budget cannot be negative")
        self.budget_bytes = budget_bytes
        self.slots = slots
        self.gpu = gpu
        #: job id -> declared bytes of admitted (running) jobs.
        self.admitted: dict[str, int] = {}
        #: What models hold (residency.py): weights by model, and the bytes an
        #: unload did not give back, counted until a reading shows them free.
        self.held: dict[str, int] = {}
        self._changed: asyncio.Condition | None = None
        self.max_committed_bytes = 0
        #: The bound worker's wake (see bind()).
        self._wake: Callable[[], None] = _nothing
        #: The queues' claim policies of a process shared by several queues.
        self.views: list[QueueClaims] = []

    @property
    def working_bytes(self) -> int:
        """Declared needs of the admitted jobs (their working memory)."""
        return sum(self.admitted.values())

    @property
    def held_bytes(self) -> int:
        """What resident models hold."""
        return sum(self.held.values())

    @property
    def committed_bytes(self) -> int:
        """Admitted jobs' needs plus what models hold."""
        return self.working_bytes + self.held_bytes

    @property
    def free_bytes(self) -> int:
        """Budget not committed."""
        return self.budget_bytes - self.committed_bytes

    def bind(self, wake: Callable[[], None]) -> None:
        """The claim policy's side: `wake` makes the worker re-ask capacity()."""
        self._wake = wake

    def wake(self) -> None:
        """Make the bound worker (or every bound view's) re-ask capacity()."""
        self._wake()
        for view in self.views:
            view.wake()

    def key(self, job_id: str) -> str:
        """A job's key in `admitted` (here: its id)."""
        return job_id

    def view(self, slots: int) -> QueueClaims:
        """A queue's claim policy on this shared admission; `slots` becomes
        the sum of the views' slots (what has_free_slot() weighs)."""
        view = QueueClaims(self, slots, f"{len(self.views)}/")
        self.views.append(view)
        self.slots = sum(v.slots for v in self.views)
        return view

    def waiting(self) -> int:
        """Claimed jobs not admitted yet, over every view (0 without views)."""
        return sum(v.unadmitted() for v in self.views)

    def capacity(self, claimed: int) -> int:
        """The claim policy's side: claim_capacity() for a worker running
        `claimed` jobs, those not admitted yet waiting for budget."""
        return self.claim_capacity(claimed, claimed - len(self.admitted))

    def resize(self, slots: int) -> None:
        """A new slot count (the scale target): the worker re-checks."""
        self.slots = slots
        self.wake()

    def claim_capacity(self, claimed: int, waiting: int) -> int:
        """How many jobs to claim now: one, given a free slot, some free budget
        and no claimed job still waiting for budget; else none."""
        if waiting or claimed >= self.slots or self.free_bytes <= 0:
            return 0
        return 1

    def condition(self) -> asyncio.Condition:
        """What admit() and residency.py wait on; notified on every change."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def committed(self) -> None:
        """After a commitment (under condition()): check the invariant, keep
        the peak, and let the worker claim the next job."""
        committed = self.committed_bytes
        if committed > self.budget_bytes:
            raise AdmissionInvariantError(
                f"{committed} bytes committed of a {self.budget_bytes}-byte budget"
            )
        self.max_committed_bytes = max(self.max_committed_bytes, committed)
        self.wake()

    def check_fits_at_all(self, need: int) -> None:
        """JobTooLarge (unrecoverable) when the job exceeds the whole budget."""
        if need > self.budget_bytes:
            raise JobTooLarge(too_large_reason(need, self.budget_bytes, self.gpu))

    async def admit(
        self, job_id: str, need: int, abort: Callable[[], bool] = lambda: False
    ) -> bool:
        """Wait until `need` fits in the uncommitted budget, then commit it and
        return True; return False without committing if `abort()` turns true
        first (re-checked on release() and poke())."""
        self.check_fits_at_all(need)
        changed = self.condition()
        async with changed:
            await changed.wait_for(lambda: abort() or need <= self.free_bytes)
            if abort():
                return False
            self.admitted[job_id] = need
            committed = self.committed_bytes
            if committed > self.budget_bytes:  # pragma: no cover - guarded above
                del self.admitted[job_id]
                raise AdmissionInvariantError(
                    f"committing {need} bytes would reach {committed} of "
                    f"{self.budget_bytes}"
                )
            self.max_committed_bytes = max(self.max_committed_bytes, committed)
            self.wake()  # no longer waiting: the next job may be claimed
            return True

    async def release(self, job_id: str) -> None:
        """Uncommit a finished job's need; a waiting job and the worker re-check."""
        if self.admitted.pop(job_id, None) is not None:
            self.wake()
            await self.poke()

    async def poke(self) -> None:
        """Wake waiting jobs to re-check (budget freed or a cancel arrived)."""
        if self._changed is None:
            return
        async with self._changed:
            self._changed.notify_all()


class PlacedAdmission:
    """A GPU worker's claim policy with placement: the admission's capacity,
    and before each claim the placement's choice of job (queues.ClaimGate)."""

    def __init__(
        self,
        claims: VramAdmission | QueueClaims,
        before_claim: Callable[[], Awaitable[float]],
    ) -> None:
        self.claims = claims
        self._before_claim = before_claim

    def capacity(self, claimed: int) -> int:
        """The admission's answer (or its queue's view's)."""
        return self.claims.capacity(claimed)

    def bind(self, wake: Callable[[], None]) -> None:
        """The admission (or its view) wakes the worker."""
        self.claims.bind(wake)

    async def before_claim(self) -> float:
        """0: claim now; > 0: hold that long (placement.py)."""
        return await self._before_claim()


class QueueClaims:
    """One queue's claim policy (queues.worker.ClaimPolicy) in a process
    whose queues share one `VramAdmission` (one budget on one GPU)."""

    def __init__(self, admission: VramAdmission, slots: int, tag: str) -> None:
        self.admission = admission
        self.slots = slots
        #: What this view's job keys start with (`key()`).
        self.tag = tag
        self._wake: Callable[[], None] = _nothing
        #: How many jobs the queue's worker holds now (set by its GpuWorker).
        self.claimed: Callable[[], int] = lambda: 0
        #: The last capacity() answered 0 because another queue's claimed job
        #: was not admitted: that queue's next capacity() wakes this one.
        self._held_by_others = False
        #: Another view saw a claimed job of this one not admitted.
        self._seen_waiting = False

    def key(self, job_id: str) -> str:
        """A job's key in the shared `admitted` (unique across the queues)."""
        return self.tag + job_id

    def bind(self, wake: Callable[[], None]) -> None:
        """The claim policy's side: `wake` makes the worker re-ask capacity()."""
        self._wake = wake

    def wake(self) -> None:
        """Make the bound worker re-ask capacity()."""
        self._wake()

    def admitted_count(self) -> int:
        """This queue's admitted (running) jobs."""
        return sum(1 for k in self.admission.admitted if k.startswith(self.tag))

    def unadmitted(self) -> int:
        """This queue's claimed jobs not admitted yet."""
        waiting = max(self.claimed() - self.admitted_count(), 0)
        if waiting:
            self._seen_waiting = True
        return waiting

    def capacity(self, claimed: int) -> int:
        """One, given a free slot of this queue, some free budget and no
        claimed job of any queue of the process waiting for budget; else 0.

        A job another queue's worker claimed counts as waiting from its claim
        until it is admitted, or until it leaves that worker's jobs (it ended
        without admission, or it is being finished after its release). Only
        that worker is told when one of its jobs ends, and it re-asks its own
        capacity() then: so the queues held back by this one's jobs are woken
        by its first capacity() with none of its own waiting. (Woken by
        nothing, such a queue would sleep with a free slot and its marker
        taken, its jobs waiting until some other change of the budget.) Only
        a queue that was seen waiting wakes the others, once: two queues held
        by a third never wake each other in turn."""
        adm = self.admission
        own = claimed - self.admitted_count()
        if own <= 0 and self._seen_waiting:
            self._seen_waiting = False
            for view in adm.views:
                if view is not self and view._held_by_others:
                    view._held_by_others = False
                    view.wake()
        others = sum(v.unadmitted() for v in adm.views if v is not self)
        self._held_by_others = others > 0
        if own > 0 or others or claimed >= self.slots or adm.free_bytes <= 0:
            return 0
        return 1

    def resize(self, slots: int) -> None:
        """A new slot count for this queue (the scale target)."""
        self.slots = slots
        self.admission.slots = sum(v.slots for v in self.admission.views)
        self._wake()
