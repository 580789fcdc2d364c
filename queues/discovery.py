"""Finding queues in Redis: every `{prefix}:{name}:meta` or `:id` key marks one.

One SCAN pass per prefix matches both markers (`{prefix}:*:[mi][ed]*`) and the
exact suffix is checked here: Redis's glob over every key is the cost of a
scan, so one pass over a million keys costs half of one pass per marker.

`CachedDiscovery` shares one scan's result between a process's callers (the
dashboard's pages, the API's `*` listing). A scan of a large keyspace is also
written to a registry in Redis (`REGISTRY_KEY`), so that the first page of a
new process, which must not wait for such a scan, answers at once with the
queues known so far (those that still exist) while its scan runs.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence

import redis

from .cluster import is_cluster_client

log = logging.getLogger(__name__)

#: A result stays fresh for this many times the scan's own duration, which
#: bounds discovery's share of Redis time to about 5%.
TTL_PER_SCAN = 20
#: A stale result is rescanned inside the call when the last scan took at most
#: this long (a small keyspace), else in the background.
INLINE_SCAN_S = 0.05
#: A scan is charged at most this much, plus `SCAN_S_PER_KEY` a key of the
#: keyspace (Redis's SCAN takes about 0.6 us a key on a 2-core VM): time
#: beyond that is this process waiting for a CPU or its GIL (a busy host, a
#: server still starting up), not Redis's work, and must not keep a new queue
#: off the pages for up to the whole TTL.
SCAN_S_FLOOR = 0.005
SCAN_S_PER_KEY = 2e-6

#: A keyspace larger than this (DBSIZE) takes a scan too long to wait for
#: on a first page (about 0.15 s of SCAN on a small machine): there every
#: scan writes what it found to the registry, and first pages answer from it.
SMALL_KEYSPACE = 50_000
#: The set of `prefix:name` of the queues the last scans of a large keyspace found.
REGISTRY_KEY = "bullpen:queues"

_MARKERS = (":meta", ":id")
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def discover_queues(
    client: redis.Redis, prefixes: Iterable[str] = ("bull",), scan_count: int = 1000
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


def keyspace_size(client: redis.Redis) -> int:
    """DBSIZE, summed over a Redis Cluster's primaries (a cluster client's
    plain DBSIZE asks one node)."""
    if is_cluster_client(client):
        sizes = client.dbsize(target_nodes=client.PRIMARIES)  # type: ignore[attr-defined]
        if isinstance(sizes, dict):
            return sum(int(n) for n in sizes.values())
        return int(sizes)
    return int(client.dbsize())


def _text(value: str | bytes) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="surrogateescape")
    return value


def _encodable(text: str) -> bool:
    """Whether a name is text Redis can be sent (not bytes read back with
    surrogateescape from another client's non-UTF-8 key)."""
    try:
        text.encode("utf-8")
    except UnicodeError:
        return False
    return True


def registered_queues(
    client: redis.Redis, prefixes: Sequence[str]
) -> list[tuple[str, str]]:
    """(prefix, name) of the registry's queues under `prefixes` that still
    exist (their `meta` or `id` key: asked one key at a time, so that it
    holds on a Redis Cluster too), sorted."""
    wanted = set(prefixes)
    found = []
    for member in client.smembers(REGISTRY_KEY):
        prefix, _, name = _text(member).rpartition(":")
        if prefix in wanted and name:
            found.append((prefix, name))
    if not found:
        return []
    pipe = client.pipeline(transaction=False)
    for prefix, name in found:
        for marker in _MARKERS:
            pipe.exists(f"{prefix}:{name}{marker}")
    there = pipe.execute()
    return sorted(q for i, q in enumerate(found) if there[2 * i] or there[2 * i + 1])


def register_queues(
    client: redis.Redis, prefixes: Sequence[str], found: Sequence[tuple[str, str]]
) -> None:
    """Make the registry's queues under `prefixes` those of a complete scan."""
    wanted = set(prefixes)
    now = {f"{p}:{n}" for p, n in found if _encodable(f"{p}:{n}")}
    had = {_text(m) for m in client.smembers(REGISTRY_KEY)}
    gone = [m for m in had - now if m.rpartition(":")[0] in wanted]
    new = now - had
    if new:
        client.sadd(REGISTRY_KEY, *sorted(new))
    if gone:
        client.srem(REGISTRY_KEY, *gone)


class CachedDiscovery:
    """The SCAN for queues under `prefixes()`, shared by a process's callers.

    A result is reused while fresh, for `TTL_PER_SCAN` times what the scan
    cost (its time, at most `SCAN_S_FLOOR` + `SCAN_S_PER_KEY` a key), at
    most `max_ttl_s()` (0: no caching, every call scans): a few
    thousand keys (a millisecond) rescan on nearly every call, inside it, so
    a new queue shows at once; a million keys (~1 s of SCAN) every ~17 s, in
    the background, while callers keep the previous list. Without a result
    yet, one scan runs in the background (started by `prewarm` or by the
    first caller). On a keyspace of more than `SMALL_KEYSPACE` keys, callers
    with `from_registry` answer at once with the registry's queues that
    still exist (perhaps none yet), until the scan ends (`complete()` says
    which); on a smaller one, or without `from_registry`, they wait for the
    scan (at most `wait_s()`, then they scan themselves). A scan of a large
    keyspace writes what it found to the registry.
    """

    def __init__(
        self,
        prefixes: Callable[[], Sequence[str]],
        max_ttl_s: Callable[[], float],
        wait_s: Callable[[], float],
        scan: Callable[[redis.Redis, Sequence[str]], list[tuple[str, str]]]
        | None = None,
        from_registry: bool = True,
    ) -> None:
        self.prefixes = prefixes
        self.max_ttl_s = max_ttl_s
        self.wait_s = wait_s
        self.from_registry = from_registry
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
        #: The registry's queues, answered until the first scan ends.
        self.known: list[tuple[str, str]] | None = None
        self.at = 0.0
        #: Seconds the last successful scan took.
        self.scan_s = 0.0
        self.scanning: threading.Event | None = None

    def complete(self) -> bool:
        """Whether answers come from a complete scan (not the registry's list
        while the first scan runs)."""
        with self.lock:
            return self.found is not None or self.known is None

    def ttl(self) -> float:
        """How long the current result stays fresh (see the class)."""
        return min(self.max_ttl_s(), TTL_PER_SCAN * self.scan_s)

    def _scan(self, conn: redis.Redis, done: threading.Event) -> None:
        try:
            started = time.monotonic()
            found = self.scan(conn, self.prefixes())
            ended = time.monotonic()
            took = ended - started
            keys = self._keys(conn)
            if keys is not None:
                took = min(took, SCAN_S_FLOOR + SCAN_S_PER_KEY * keys)
            with self.lock:
                if self.client is conn:
                    self.found, self.at, self.scan_s = found, ended, took
            if keys is not None and keys > SMALL_KEYSPACE:
                self._register(conn, found)
        finally:
            with self.lock:
                if self.scanning is done:
                    self.scanning = None
            done.set()

    @staticmethod
    def _keys(conn: redis.Redis) -> int | None:
        """The keyspace's size after a scan (None, logged, if Redis fails it)."""
        try:
            return keyspace_size(conn)
        except redis.RedisError as exc:
            log.info("keyspace size not read: %s", exc)
            return None

    def _register(self, conn: redis.Redis, found: list[tuple[str, str]]) -> None:
        """Write a large keyspace's scan to the registry (best effort: a
        read-only replica or an outage only logs)."""
        try:
            register_queues(conn, self.prefixes(), found)
        except (redis.RedisError, UnicodeError) as exc:
            log.info("queue registry not written: %s", exc)

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
            first = None
            if self.max_ttl_s() <= 0:
                inline = self._start(conn)
            elif self.client is conn and self.found is not None:
                stale = time.monotonic() - self.at > self.ttl()
                if not stale or self.scanning is not None:
                    return self.found
                inline = self._start(conn)
                if self.scan_s > INLINE_SCAN_S:
                    self._in_background(conn, inline)
                    return self.found
            else:
                first = self.scanning if self.client is conn else None
                if first is None:
                    first = self._start(conn)
                    self._in_background(conn, first)
        if first is not None:
            return self._first(conn, first)
        self._scan(conn, inline)
        with self.lock:
            return self.found if self.found is not None else []

    def _first(self, conn: redis.Redis, scan: threading.Event) -> list[tuple[str, str]]:
        """No result yet and `scan` in flight: on a large keyspace the
        registry's queues (read once per first scan), else the scan's result."""
        if self.from_registry:
            with self.lock:
                if self.client is conn and self.found is not None:
                    return self.found
                known = self.known if self.client is conn else None
            if known is None and keyspace_size(conn) > SMALL_KEYSPACE:
                known = registered_queues(conn, self.prefixes())
            if known is not None:
                with self.lock:
                    if self.client is conn and self.found is not None:
                        return self.found
                    if self.client is conn:
                        self.known = known
                    return known
        scan.wait(self.wait_s())
        with self.lock:
            if self.client is conn and self.found is not None:
                return self.found
            inline = self._start(conn)  # that scan failed or hangs: try here
        self._scan(conn, inline)
        with self.lock:
            return self.found if self.found is not None else []
