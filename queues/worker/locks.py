"""Batched lock renewal: every lock a worker holds, renewed in one call."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import ops
from .support import log

if TYPE_CHECKING:
    from ..keys import QueueKeys
    from .background import Background
    from .reporting import WorkerReports


class LockRenewer:
    """Keeps the locks of a worker's jobs: those running, and those finished
    but not saved yet (Redis refused or was unreachable), which would
    otherwise run again."""

    def __init__(
        self,
        name: str,
        keys: QueueKeys,
        lock_duration: int,
        held: Callable[[], dict[str, str | None]],
        background: Background,
        reports: WorkerReports,
    ) -> None:
        self.name = name
        self._keys = keys
        self._lock_duration = lock_duration
        self._held = held
        self._background = background
        self._reports = reports

    async def run(self) -> None:
        """Renew until the background loops stop."""
        # A quarter of the lock duration, like BullMQ's timer (lockRenewTime/2):
        # a renewal that fails (Redis busy or unreachable) is retried while
        # the locks still have half their time left.
        interval = self._lock_duration / 4 / 1000
        while not await self._background.pause(interval):
            held = self._held()
            if not held:
                continue
            try:
                lost = await self._background.run(
                    ops.extend_locks(self._keys, self._lock_duration, held)
                )
            except Exception as exc:  # noqa: BLE001 - renewal must outlive any error
                self._background.failed("lock renewal", exc)
                self._reports.error(exc)
                continue
            self._background.answered()
            # A job saved while the renewal was in Redis let its lock go
            # itself: only a lock still held was lost.
            still = self._held()
            for job_id in (j for j in lost if still.get(j) == held.get(j)):
                log.warning("worker %s: lost the lock of job %s", self.name, job_id)
