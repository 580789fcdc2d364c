"""The stalled-job check: jobs whose lock lapsed (their worker died or hung)
go back to wait, or fail once stalled more than max_stalled_count times."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import ops
from .support import log

if TYPE_CHECKING:
    from ..keys import QueueKeys
    from .background import Background
    from .reporting import WorkerReports


class StalledChecker:
    """Runs a queue's stalled check every `stalled_interval` ms."""

    def __init__(
        self,
        name: str,
        keys: QueueKeys,
        max_stalled_count: int,
        stalled_interval: int,
        moved_back: Callable[[], None],
        background: Background,
        reports: WorkerReports,
    ) -> None:
        self.name = name
        self._keys = keys
        self._max_stalled_count = max_stalled_count
        self._stalled_interval = stalled_interval
        #: Called once jobs went back to wait: there is something to claim.
        self._moved_back = moved_back
        self._background = background
        self._reports = reports

    async def run(self) -> None:
        """Check until the background loops stop."""
        while not self._background.stopping:
            try:
                started = time.monotonic()
                check = ops.move_stalled(
                    self._keys,
                    int(time.time() * 1000),
                    self._max_stalled_count,
                    self._stalled_interval,
                )
                moved = await self._background.run(check)
                if moved:
                    log.warning(
                        "worker %s: moved stalled jobs back to wait: %s",
                        self.name,
                        ", ".join(moved),
                    )
                    self._moved_back()
                    failing = await self._count_failing(moved)
                    self._reports.stalled(moved, failing, started)
            except Exception as exc:  # noqa: BLE001 - the check must outlive any error
                self._background.failed("stalled check", exc)
                self._reports.error(exc)
            await self._background.pause(self._stalled_interval / 1000)

    async def _count_failing(self, moved: list[str]) -> int:
        """How many of the moved jobs the check marked to fail (stalled more
        than max_stalled_count times): they fail when next taken."""
        return await self._background.run(ops.count_marked_to_fail(self._keys, moved))
