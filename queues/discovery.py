"""Finding queues in Redis: every `{prefix}:{name}:meta` or `:id` key marks one.

One SCAN pass per prefix matches both markers (`{prefix}:*:[mi][ed]*`) and the
exact suffix is checked here: Redis's glob over every key is the cost of a
scan, so one pass over a million keys costs half of one pass per marker.

`CachedDiscovery` shares one scan's result between a process's callers (the
dashboard's pages, the API's `*` listing).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence

import redis

log = logging.getLogger(__name__)

#: A result stays fresh for this many times the scan's own duration, which
#: bounds discovery's share of Redis time to about 5%.
TTL_PER_SCAN = 20
#: A stale result is rescanned inside the call when the last scan took at most
#: this long (a small keyspace), else in the background.
INLINE_SCAN_S = 0.05

_MARKERS = (":meta", ":id")
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def discover_queues(
    client: redis.Redis, prefixes: Iterable[str] = ("bull",), scan_count: int = 5000
) -> list[tuple[str, str]]:
    """(prefix, name) of every queue found by SCAN (never KEYS), sorted. On
    a Redis Cluster client, redis-py's `scan_iter` scans every primary in
    turn, so queues in every slot are found."""
    found: set[tuple[str, str]] = set()
    for prefix in prefixes:
        pattern = _GLOB_SPECIAL.sub(r"\\\1", prefix) + ":*:[mi][ed]*"
        head = len(prefix) + 1
        for key in client.scan_iter(match=pattern, count=scan_count):
            if isinstance(key, bytes):
                key = key.decode(errors="surrogateescape")
            for marker in _MARKERS:
                if key.endswith(marker):
                    name = key[head : -len(marker)]
                    if name and ":" not in name:
                        found.add((prefix, name))
    return sorted(found)


class CachedDiscovery:
    """The SCAN for queues under `prefixes()`, shared by a process's callers.

    A result is reused while fresh, for `TTL_PER_SCAN` times what the scan
    cost, at most `max_ttl_s()` (0: no caching): a few thousand keys (a
    millisecond) rescan on nearly every call, inside it, so a new queue shows
    at once; a million keys (~1 s of SCAN) every ~17 s, in the background,
    while callers keep the previous list. Without a result yet, callers wait
    (up to `wait_s()`) for the one scan in flight, started by `prewarm` or by
    the first caller, instead of each scanning.
    """

    def __init__(
        self,
        prefixes: Callable[[], Sequence[str]],
        max_ttl_s: Callable[[], float],
        wait_s: Callable[[], float],
        scan: Callable[[redis.Redis, Sequence[str]], list[tuple[str, str]]]
        | None = None,
    ) -> None:
        self.prefixes = prefixes
        self.max_ttl_s = max_ttl_s
        self.wait_s = wait_s
        #: The scan itself (tests replace it to count or slow scans).
        self.scan = scan or discover_queues
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
        """How long the current result stays fresh (see the class)."""
        return min(self.max_ttl_s(), TTL_PER_SCAN * self.scan_s)

    def _scan(self, conn: redis.Redis, done: threading.Event) -> None:
        try:
            started = time.monotonic()
            found = self.scan(conn, self.prefixes())
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

    def _in_background(self, conn: redis.Redis, done: threading.Event) -> None:
        threading.Thread(
            target=self._background, args=(conn, done), daemon=True
        ).start()

    def prewarm(self, conn: redis.Redis) -> None:
        """Start a background scan when there is no result and none in flight."""
        with self.lock:
            if self.client is conn and (self.found is not None or self.scanning):
                return
            done = self._start(conn)
        self._in_background(conn, done)

    def get(self, conn: redis.Redis) -> list[tuple[str, str]]:
        """(prefix, name) of the queues found (see the class)."""
        with self.lock:
            ours = self.client is conn and self.max_ttl_s() > 0
            waiting = self.scanning if ours else None
            if ours and self.found is not None:
                stale = time.monotonic() - self.at > self.ttl()
                if not stale or waiting is not None:
                    return self.found
                done = self._start(conn)
                if self.scan_s > INLINE_SCAN_S:
                    self._in_background(conn, done)
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
