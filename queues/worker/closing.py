"""Closing a worker: waiting for running jobs, saving what finished, and
closing the connections."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from .. import defaults
from ..outages import recoverable
from .support import log

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from ..outages import Outage
    from ..queue import AsyncQueue, Queue
    from ..scripts import Scripts
    from .reporting import WorkerReports
    from .threads import ThreadRunner


class Closing:
    """Mixin of AsyncWorker: what run() does once close() was called."""

    name: str
    queue: AsyncQueue
    close_timeout: float
    abandoned: int
    _tasks: set[asyncio.Task[Any]]
    _finished: list[dict[str, Any]]
    _force: bool
    _wake: asyncio.Event | None
    _outage: Outage
    _once: Scripts
    _bclient: aioredis.Redis | None
    _threads: ThreadRunner | None
    _sync_queue: Queue | None
    _reports: WorkerReports

    async def _flush(self) -> None:
        raise NotImplementedError

    async def _drain_running(self) -> None:
        """After close(): wait for running jobs (up to close_timeout; not at
        all when forced), then save what finished."""
        deadline = time.monotonic() + self.close_timeout
        while self._tasks and not self._force and time.monotonic() < deadline:
            assert self._wake is not None
            self._wake.clear()
            waiter = asyncio.ensure_future(self._wake.wait())
            await asyncio.wait(
                {*self._tasks, waiter},
                timeout=deadline - time.monotonic(),
                return_when=asyncio.FIRST_COMPLETED,
            )
            waiter.cancel()
        self.abandoned = len(self._tasks)
        for task in list(self._tasks):
            task.cancel()
        # Retried until close_timeout has passed (at least 3 tries), their
        # locks renewed meanwhile; what is left runs again after the stalled
        # check. A forced close tries once.
        tries = 0
        while self._finished:
            try:
                await self._flush()
            except Exception as exc:
                if not recoverable(exc):
                    raise
                tries += 1
                if self._force or (tries >= 3 and time.monotonic() >= deadline):
                    log.warning(
                        "worker %s: %d finished jobs not saved before closing",
                        self.name,
                        len(self._finished),
                    )
                    break
                await asyncio.sleep(self._outage.failed(exc))

    async def _shutdown_clients(self) -> None:
        await self._reports.written(defaults.HELPER_STOP_S)
        if self._bclient is not None:
            await self._bclient.aclose()
        await self._once.client.aclose()
        if self._threads is not None:
            self._threads.shutdown()
        if self._sync_queue is not None:
            self._sync_queue.close()
        await self.queue.close()
