"""Closing a worker: close() asks (forced or not); once the loop has stopped
claiming, run() waits for the running jobs and saves what finished."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from ..outages import recoverable
from .support import log

if TYPE_CHECKING:
    from ..outages import Outage
    from .finishing import Finisher


class Closer:
    """The close of one worker: whether it was asked for, and how it went."""

    def __init__(self, name: str, wake: asyncio.Event, outage: Outage) -> None:
        self.name = name
        self._wake = wake
        self._outage = outage
        #: close() was called: the worker claims no more jobs.
        self.asked = False
        #: close(force=True) was: running jobs are not waited for.
        self.forced = False
        #: Jobs still running when the close gave up on them (close_timeout,
        #: or forced): the stalled check returns them to wait.
        self.abandoned = 0

    def ask(self, force: bool) -> bool:
        """Ask the worker to close; True the first time."""
        first = not self.asked
        self.asked = True
        self.forced = self.forced or force
        self._wake.set()
        return first

    async def drain(
        self,
        timeout: float,
        tasks: set[asyncio.Task[Any]],
        finisher: Finisher,
        opts: str,
    ) -> None:
        """Wait for the running jobs' `tasks` (up to `timeout` seconds; not
        at all once forced), then save what finished (claiming nothing:
        `opts`)."""
        deadline = time.monotonic() + timeout
        while tasks and not self.forced and time.monotonic() < deadline:
            self._wake.clear()
            waiter = asyncio.ensure_future(self._wake.wait())
            await asyncio.wait(
                {*tasks, waiter},
                timeout=deadline - time.monotonic(),
                return_when=asyncio.FIRST_COMPLETED,
            )
            waiter.cancel()
        self.abandoned = len(tasks)
        for task in list(tasks):
            task.cancel()
        # Retried until close_timeout has passed (at least 3 tries), their
        # locks renewed meanwhile; what is left runs again after the stalled
        # check. A forced close tries once.
        tries = 0
        while finisher.pending:
            try:
                await finisher.save(opts)
            except Exception as exc:
                if not recoverable(exc):
                    raise
                tries += 1
                if self.forced or (tries >= 3 and time.monotonic() >= deadline):
                    log.warning(
                        "worker %s: %d finished jobs not saved before closing",
                        self.name,
                        len(finisher.pending),
                    )
                    break
                await asyncio.sleep(self._outage.failed(exc))
