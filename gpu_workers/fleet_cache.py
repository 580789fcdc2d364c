"""One process's fleet snapshot (fleet_snapshot.py) with a bounded age: a
request older than `max_age_s` gets the one it holds while one background
thread reads the next; only a first read, one far too old (STALE_S) or one
after a failed read waits for Redis.

    cache = SnapshotCache(fleet.snapshot, max_age_s=2.0)
    cache.get()                     # the snapshot, without waiting for a read
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .fleet_snapshot import FleetSnapshot

#: Oldest snapshot a cache still answers with while it reads the next (after
#: a quiet spell); an older one makes the request wait for a read.
STALE_S = 30.0


class SnapshotCache:
    """One process's snapshot, at most `max_age_s` old when it can be: an
    older one is still served (up to `stale_s`) while one background thread
    reads the next, so requests do not wait for a read. `max_age_s` 0: every
    call reads (tests, tiny fleets)."""

    def __init__(
        self,
        read: Callable[[], FleetSnapshot],
        max_age_s: float,
        stale_s: float = STALE_S,
    ) -> None:
        self.read = read
        self.max_age_s = max_age_s
        self.stale_s = max(stale_s, max_age_s)
        self._lock = threading.Lock()
        self._snap: FleetSnapshot | None = None
        self._at = 0.0
        self._refreshing = False
        self._failed: Exception | None = None
        #: Reads done (for tests and the bench).
        self.reads = 0

    def get(self) -> FleetSnapshot:
        """The snapshot: fresh enough, or stale while the next is read. When
        the last read failed (Redis down), a stale one is not served: the
        read's error is raised (and the next call tries again)."""
        if self.max_age_s <= 0:
            self.reads += 1
            return self.read()
        now = time.monotonic()
        with self._lock:
            snap, age, failed = self._snap, now - self._at, self._failed
            if snap is not None and age <= self.max_age_s:
                return snap
            start = not self._refreshing
            if start:
                self._refreshing = True
        if snap is not None and age <= self.stale_s and failed is None:
            if start:
                threading.Thread(
                    target=self._background, name="fleet-snapshot", daemon=True
                ).start()
            return snap
        if start:
            return self._refresh()
        # Another caller reads one already: wait for it (bounded).
        for _ in range(200):
            time.sleep(0.05)
            with self._lock:
                if self._snap is not None and self._snap is not snap:
                    return self._snap
        return self.read()

    def _background(self) -> None:
        try:
            self._refresh()
        except Exception:  # noqa: BLE001 - kept in _failed, raised by get()
            pass

    def _refresh(self) -> FleetSnapshot:
        try:
            snap = self.read()
        except Exception as exc:
            with self._lock:
                self._refreshing, self._failed = False, exc
            raise
        with self._lock:
            self.reads += 1
            self._snap, self._at = snap, time.monotonic()
            self._refreshing, self._failed = False, None
        return snap

    def clear(self) -> None:
        """Forget the snapshot (tests point settings elsewhere)."""
        with self._lock:
            self._snap, self._at = None, 0.0
