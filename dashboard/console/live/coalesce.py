"""Latest-wins rate limiting of progress: at most one update per key per interval.

The first update of a key goes out at once; updates that follow within the
interval replace each other, and the latest goes out when the interval ends
(`due`). Before any other event of the same job is sent, its pending update is
taken out (`take`) so that progress never arrives after the job's completion
(`batch_message`: the rule for live progress, applied once per process by
the events reader).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

from queues.events import FINAL_EVENTS

#: Keys idle this long are forgotten (when the table is swept).
_IDLE_S = 5.0
#: The table is swept when it grows past this many keys.
_SWEEP_AT = 2_000


class Coalescer:
    """Per-key latest-wins limiter; the clock is injectable for tests."""

    def __init__(
        self, interval_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._last_sent: dict[Hashable, float] = {}
        self._pending: dict[Hashable, Any] = {}

    def offer(self, key: Hashable, item: Any) -> Any | None:
        """The item when it may go out now; otherwise None (it is held)."""
        now = self.clock()
        last = self._last_sent.get(key)
        if last is None or now - last >= self.interval_s:
            self._pending.pop(key, None)
            self._last_sent[key] = now
            if len(self._last_sent) > _SWEEP_AT:
                self._sweep(now)
            return item
        self._pending[key] = item
        return None

    def take(self, key: Hashable) -> Any | None:
        """The key's held item (to send before another event of it), if any."""
        item = self._pending.pop(key, None)
        if item is not None:
            self._last_sent[key] = self.clock()
        return item

    def forget(self, key: Hashable) -> None:
        """Drop a key whose job has finished."""
        self._pending.pop(key, None)
        self._last_sent.pop(key, None)

    def due(self) -> list[Any]:
        """Held items whose interval has ended, in the order they were held."""
        if not self._pending:
            return []
        now = self.clock()
        out = []
        for key in list(self._pending):
            if now - self._last_sent[key] >= self.interval_s:
                out.append(self._pending.pop(key))
                self._last_sent[key] = now
        return out

    def next_due_s(self) -> float | None:
        """Seconds until the next held item is due (None when nothing is held)."""
        if not self._pending:
            return None
        now = self.clock()
        soonest = min(self._last_sent[k] for k in self._pending) + self.interval_s
        return max(soonest - now, 0.0)

    def __len__(self) -> int:
        return len(self._pending)

    def _sweep(self, now: float) -> None:
        for key, last in list(self._last_sent.items()):
            if now - last > _IDLE_S and key not in self._pending:
                del self._last_sent[key]


def batch_message(
    coalescer: Coalescer, message: dict[str, Any], out: list[dict[str, Any]]
) -> None:
    """Add a browser message to a batch going out: a job's progress at most
    once per the coalescer's interval (latest wins), and a held progress of a
    job before that job's next event; a job's final event forgets it."""
    job = message.get("job")
    key = (message["queue"], job)
    if message["type"] == "progress":
        if job is None:
            out.append(message)
            return
        now = coalescer.offer(key, message)
        if now is not None:
            out.append(now)
        return
    if job is not None:
        held = coalescer.take(key)
        if held is not None:
            out.append(held)
        if message["event"] in FINAL_EVENTS:
            coalescer.forget(key)
    out.append(message)
