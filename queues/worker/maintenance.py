"""Background duties of a worker: batched lock renewal and the stalled check."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from .. import ops
from ..drive import run_async
from ..outages import recoverable
from .support import log

if TYPE_CHECKING:
    from ..job import Job
    from ..keys import QueueKeys
    from ..outages import Outage
    from ..queue import AsyncQueue
    from .reporting import WorkerReports

T = TypeVar("T")


class Maintenance:
    """Mixin of AsyncWorker: lock renewal and stalled-job recovery loops."""

    name: str
    keys: QueueKeys
    queue: AsyncQueue
    lock_duration: int
    stalled_interval: int
    max_stalled_count: int
    _running: dict[str, Job]
    _finished: list[dict[str, Any]]
    _saving: list[dict[str, Any]]
    _outage: Outage
    _stopping: asyncio.Event
    _drained: bool
    _wake: asyncio.Event | None
    _reports: WorkerReports

    async def _lock_renewal_loop(self) -> None:
        # A quarter of the lock duration, like BullMQ's timer (lockRenewTime/2):
        # a renewal that fails (Redis busy or unreachable) is retried while
        # the locks still have half their time left.
        # Jobs that finished but are not saved yet (Redis refused or was
        # unreachable) keep their locks too, or they would run again.
        interval = self.lock_duration / 4 / 1000
        while not await self._stop_within(interval):
            held = {j.id: j.token for j in self._running.values()}
            for entry in (*self._saving, *self._finished):
                held[entry["id"]] = entry["token"]
            if not held:
                continue
            try:
                lost = await self._upkeep(
                    ops.extend_locks(self.keys, self.lock_duration, held)
                )
            except Exception as exc:  # noqa: BLE001 - renewal must outlive any error
                self._helper_failed("lock renewal", exc)
                self._reports.error(exc)
                continue
            self._helper_answered()
            for job_id in lost:
                log.warning("worker %s: lost the lock of job %s", self.name, job_id)

    async def _count_failing(self, moved: list[str]) -> int:
        """How many of the moved jobs the check marked to fail (stalled more
        than max_stalled_count times): they fail when next taken."""
        return await self._upkeep(ops.count_marked_to_fail(self.keys, moved))

    def _upkeep(self, op: ops.Op[T]) -> Awaitable[T]:
        """Run an upkeep op on the queue's client; a refusal stays Redis's own
        error (the loops wait it out themselves)."""
        queue = self.queue
        return run_async(op, queue.client, queue.scripts, refusals_as_unavailable=False)

    async def _stop_within(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True as soon as the worker is shutting down."""
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def _stalled_check_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                started = time.monotonic()
                check = ops.move_stalled(
                    self.keys,
                    int(time.time() * 1000),
                    self.max_stalled_count,
                    self.stalled_interval,
                )
                moved = await self._upkeep(check)
                if moved:
                    log.warning(
                        "worker %s: moved stalled jobs back to wait: %s",
                        self.name,
                        ", ".join(moved),
                    )
                    self._drained = False
                    if self._wake is not None:
                        self._wake.set()
                    failing = await self._count_failing(moved)
                    self._reports.stalled(moved, failing, started)
            except Exception as exc:  # noqa: BLE001 - the check must outlive any error
                self._helper_failed("stalled check", exc)
                self._reports.error(exc)
            await self._stop_within(self.stalled_interval / 1000)

    def _helper_failed(self, what: str, exc: BaseException) -> None:
        """An outage is logged once (by whichever part meets it first);
        any other error every time."""
        if recoverable(exc):
            self._outage.failed(exc)
        else:
            log.warning("worker %s: %s failed (%r)", self.name, what, exc)

    def _helper_answered(self) -> None:
        """Redis took a write: end the outage and let the main loop save and
        claim now rather than after its backoff."""
        if self._outage.ongoing:
            self._outage.succeeded()
            if self._wake is not None:
                self._wake.set()
