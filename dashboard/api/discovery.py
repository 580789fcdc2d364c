"""Which queues live under the API's prefix, for a `*` token's listing: the
SCAN of `queues.discovery`, its result shared by a process's requests.

A result is reused while fresh, for 20 times what the scan cost (bounding
discovery's share of Redis time to about 5%), at most
BULLPEN_DISCOVERY_TTL_S: a few thousand keys (a millisecond) rescan on nearly
every call, inside the request, so a new queue shows at once; a million keys
(~1 s of SCAN) every ~17 s, in the background, while callers keep the
previous list. Without a result yet, callers wait for the one scan in flight
instead of each scanning.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import redis
from django.conf import settings

from queues.discovery import discover_queues

from . import conf

log = logging.getLogger("dashboard.api")

#: A result stays fresh for this many times the scan's own duration.
TTL_PER_SCAN = 20
#: A stale result is rescanned inside the request when the last scan took at
#: most this long (a small keyspace), else in the background.
INLINE_SCAN_S = 0.05


class CachedDiscovery:
    """The SCAN for queues under `prefixes()`, cached (see the module)."""

    def __init__(
        self,
        prefixes: Callable[[], Sequence[str]],
        max_ttl_s: Callable[[], float],
        wait_s: Callable[[], float],
    ) -> None:
        self.prefixes = prefixes
        self.max_ttl_s = max_ttl_s
        self.wait_s = wait_s
        self.lock = threading.Lock()
        self.clear()

    def reset(self) -> None:
        """Forget the result, under the lock (tests point settings elsewhere)."""
        with self.lock:
            self.clear()

    def clear(self) -> None:
        """Forget the result (a new client; the lock is held)."""
        self.client: redis.Redis | None = None
        self.found: list[tuple[str, str]] | None = None
        self.at = 0.0
        #: Seconds the last successful scan took.
        self.scan_s = 0.0
        self.scanning: threading.Event | None = None

    def ttl(self) -> float:
        """How long the current result stays fresh (see the module)."""
        return min(self.max_ttl_s(), TTL_PER_SCAN * self.scan_s)

    def _scan(self, conn: redis.Redis, done: threading.Event) -> None:
        try:
            started = time.monotonic()
            found = discover_queues(conn, self.prefixes())
            with self.lock:
                if self.client is conn:
                    self.found, self.at = found, time.monotonic()
                    self.scan_s = self.at - started
        finally:
            with self.lock:
                if self.scanning is done:
                    self.scanning = None
            done.set()

    def _background(self, conn: redis.Redis, done: threading.Event) -> None:
        try:
            self._scan(conn, done)
        except redis.RedisError as exc:
            log.warning("queue discovery failed: %s", exc)

    def _start(self, conn: redis.Redis) -> threading.Event:
        """Mark a scan in flight (the lock is held)."""
        if self.client is not conn:
            self.clear()
            self.client = conn
        self.scanning = threading.Event()
        return self.scanning

    def get(self, conn: redis.Redis) -> list[tuple[str, str]]:
        """(prefix, name) of the queues found (see the module)."""
        with self.lock:
            ours = self.client is conn and self.max_ttl_s() > 0
            waiting = self.scanning if ours else None
            if ours and self.found is not None:
                stale = time.monotonic() - self.at > self.ttl()
                if not stale or waiting is not None:
                    return self.found
                done = self._start(conn)
                if self.scan_s > INLINE_SCAN_S:
                    threading.Thread(
                        target=self._background, args=(conn, done), daemon=True
                    ).start()
                    return self.found
            elif waiting is None:
                done = self._start(conn)
        if waiting is not None:
            waiting.wait(self.wait_s())
            with self.lock:
                if self.found is not None and self.client is conn:
                    return self.found
                done = self._start(conn)  # that scan failed: try here
        self._scan(conn, done)
        with self.lock:
            return self.found if self.found is not None else []


#: The queues under the API's prefix, with the dashboard's discovery settings.
api_queues = CachedDiscovery(
    lambda: [conf.get().prefix],
    lambda: float(settings.BULLPEN_DISCOVERY_TTL_S),
    lambda: float(settings.BULLPEN_REDIS_TIMEOUT_S),
)


def reset() -> None:
    """Forget the cached result (tests point settings elsewhere)."""
    api_queues.reset()
