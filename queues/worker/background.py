"""What a worker's background loops share: when to stop, Redis through the
queue's client, and how they report an error (an outage once, anything else
every time). Lock renewal and the stalled check run on it, and so do the
loops a caller adds beside the worker (the GPU worker's heartbeat)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from .. import defaults, ops
from ..drive import run_async
from ..outages import recoverable
from .support import log

if TYPE_CHECKING:
    from ..outages import Outage
    from ..queue import AsyncQueue

T = TypeVar("T")


class Background:
    """The background loops of one worker, and what they share."""

    def __init__(
        self, name: str, queue: AsyncQueue, outage: Outage, wake: Callable[[], None]
    ) -> None:
        self.name = name
        self._queue = queue
        self._outage = outage
        self._wake = wake
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def stopping(self) -> bool:
        """Whether the loops were told to stop."""
        return self._stopping.is_set()

    def start(self, *loops: Coroutine[Any, Any, None]) -> None:
        """Run `loops` as tasks until stop()."""
        self._tasks += [asyncio.create_task(loop) for loop in loops]

    async def stop(self) -> None:
        """Stop the loops: each ends at its next tick. A cancellation that
        redis-py loses mid-command must not hang the worker's close, so the
        wait is bounded and what is left then is cancelled."""
        self._stopping.set()
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks, timeout=defaults.HELPER_STOP_S)
        for task in pending:
            task.cancel()

    async def pause(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True as soon as the loops are to stop."""
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            return False
        return True

    def run(self, op: ops.Op[T]) -> Awaitable[T]:
        """Run an upkeep op on the queue's client; a refusal stays Redis's own
        error (the loops wait it out themselves)."""
        queue = self._queue
        return run_async(op, queue.client, queue.scripts, refusals_as_unavailable=False)

    def failed(self, what: str, exc: BaseException) -> None:
        """An outage is logged once (by whichever part meets it first);
        any other error every time."""
        if recoverable(exc):
            self._outage.failed(exc)
        else:
            log.warning("worker %s: %s failed (%r)", self.name, what, exc)

    def answered(self) -> None:
        """Redis took a write: end the outage and let the main loop save and
        claim now rather than after its backoff."""
        if self._outage.ongoing:
            self._outage.succeeded()
            self._wake()
