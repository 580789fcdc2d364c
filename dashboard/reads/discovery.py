"""Which queues exist and which the pages may show: `QueueRef`, the queues
configured in settings and those the SCAN for queue keys finds (`Discovery`,
shared by a process's requests), and the checks every queue URL passes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from queues.discovery import discover_queues
from queues.drive import cmd
from queues.keys import QueueKeys
from queues.names import check_queue_name, qualified_name

from .. import conf
from .. import redis as pages_redis
from ..api import conf as api_conf
from . import gpu_fleet, on_reset, run

log = logging.getLogger(__name__)


# --- which queues exist ------------------------------------------------------
@dataclass(frozen=True, order=True)
class QueueRef:
    """A queue's key prefix and name."""

    prefix: str
    name: str

    @property
    def key(self) -> str:
        """`prefix:name`, as the live updates name queues."""
        return qualified_name(self.prefix, self.name)

    @property
    def label(self) -> str:
        """The key as text that can always be shown: bytes that are not UTF-8
        (read with surrogateescape) as `\\xNN` escapes."""
        raw = self.key.encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", "backslashreplace")

    @property
    def odd(self) -> str:
        """Why the pages cannot address this queue, which another client named
        (Node allows any name), or "" when they can."""
        if self.label != self.key:
            return "its name is not UTF-8"
        if "/" in self.key:
            return "its name holds '/', which a page address cannot"
        return ""


def parse_queue_entry(entry: str) -> QueueRef:
    """`name` (first configured prefix) or `prefix:name`."""
    prefix, _, name = entry.rpartition(":")
    return QueueRef(prefix or conf.get().prefixes[0], name)


def configured_queues() -> list[QueueRef]:
    """Queues named in settings, shown even before they exist."""
    return [parse_queue_entry(e) for e in conf.get().queues]


#: A scan's result is reused for this many times the scan's own duration
#: (bounding discovery's share of Redis time to about 5%), at most
#: BULLPEN_DISCOVERY_TTL_S.
DISCOVERY_TTL_PER_SCAN_S = 20
#: A stale result is rescanned inside the request when the last scan took at
#: most this long (a small keyspace), else in the background.
DISCOVERY_INLINE_SCAN_S = 0.05


class Discovery:
    """The SCAN for queues under `prefixes()`, shared by a process's requests.

    Without a result yet, requests wait for the one scan in flight (started by
    `prewarm` when the server starts) instead of each scanning. A result is
    reused while fresh, for 20 times what the scan cost: a few thousand keys
    (a millisecond) rescan on nearly every page, inside the request, so a new
    queue shows at once; 10k keys rescan every ~0.3 s; a million keys (~1 s
    of SCAN) every ~17 s (BULLPEN_DISCOVERY_TTL_S at most), in the
    background, while pages keep the previous list."""

    def __init__(self, prefixes: Callable[[], Sequence[str]]) -> None:
        self.prefixes = prefixes
        self.lock = threading.Lock()
        self.clear()

    def reset(self) -> None:
        """Forget the result, under the lock (tests point settings elsewhere)."""
        with self.lock:
            self.clear()

    def clear(self) -> None:
        """Forget the result (a new client; the lock is held)."""
        self.client: redis.Redis | None = None
        self.found: list[QueueRef] | None = None
        self.at = 0.0
        #: Seconds the last successful scan took.
        self.scan_s = 0.0
        self.scanning: threading.Event | None = None

    def ttl(self) -> float:
        """How long the current result stays fresh (see the class)."""
        cap = conf.get().discovery_ttl_s
        return min(cap, DISCOVERY_TTL_PER_SCAN_S * self.scan_s)

    def _scan(self, conn: redis.Redis, done: threading.Event) -> None:
        try:
            started = time.monotonic()
            found = [QueueRef(p, n) for p, n in discover_queues(conn, self.prefixes())]
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

    def prewarm(self, conn: redis.Redis) -> None:
        """Start a background scan when there is no result and none in flight."""
        with self.lock:
            if self.client is conn and (self.found is not None or self.scanning):
                return
            done = self._start(conn)
        threading.Thread(
            target=self._background, args=(conn, done), daemon=True
        ).start()

    def get(self, conn: redis.Redis) -> list[QueueRef]:
        """The queues found (see the class)."""
        with self.lock:
            ours = self.client is conn and conf.get().discovery_ttl_s > 0
            waiting = self.scanning if ours else None
            if ours and self.found is not None:
                stale = time.monotonic() - self.at > self.ttl()
                if not stale or waiting is not None:
                    return self.found
                done = self._start(conn)
                if self.scan_s > DISCOVERY_INLINE_SCAN_S:
                    threading.Thread(
                        target=self._background, args=(conn, done), daemon=True
                    ).start()
                    return self.found
            elif waiting is None:
                done = self._start(conn)
        if waiting is not None:
            waiting.wait(conf.get().redis_timeout_s)
            with self.lock:
                if self.found is not None and self.client is conn:
                    return self.found
                done = self._start(conn)  # that scan failed: try here
        self._scan(conn, done)
        with self.lock:
            return self.found if self.found is not None else []


_discovery = Discovery(lambda: conf.get().prefixes)
on_reset(_discovery.reset)


def discovered_queues() -> list[QueueRef]:
    """The queues SCAN found with the configured prefixes (cached, see
    `Discovery`)."""
    return _discovery.get(pages_redis.client())


def prewarm_discovery() -> None:
    """Scan for queues in the background now, so the first page need not wait
    (the server calls this when it starts; a dead Redis only logs)."""
    _discovery.prewarm(pages_redis.client())


def known_queues() -> list[QueueRef]:
    """Configured queues and those found by SCAN that the pages can address,
    sorted (see `odd_queues` for the others)."""
    found = set(discovered_queues()) | set(configured_queues())
    return sorted(ref for ref in found if not ref.odd)


def odd_queues() -> list[QueueRef]:
    """Queues found by SCAN that the pages cannot address (`QueueRef.odd`):
    the overview lists them apart instead of failing on them."""
    return sorted(ref for ref in discovered_queues() if ref.odd)


def internal_queues() -> set[QueueRef]:
    """Queues Bullpen itself uses (the webhook deliveries): kept out of the
    operators' queue lists, shown to admins apart and marked internal."""
    api = api_conf.get()
    return {QueueRef(api.prefix, api.webhook_queue)}


def user_queues() -> list[QueueRef]:
    """`known_queues` without Bullpen's internal ones."""
    internal = internal_queues()
    return [r for r in known_queues() if r not in internal]


def is_allowed(ref: QueueRef) -> bool:
    """Whether the dashboard may show this queue (a configured prefix or queue)."""
    try:
        check_queue_name(ref.name)
    except ValueError:
        return False
    return ref.prefix in conf.get().prefixes or ref in configured_queues()


def queue_exists(ref: QueueRef) -> bool:
    """Whether the queue is configured, has its `meta` or `id` key in Redis
    (what discovery looks for, asked directly so a queue made a moment ago
    counts) or is served by a live GPU worker (before its first job): a
    mistyped name is not a queue."""
    if ref in configured_queues():
        return True
    keys = QueueKeys(ref.name, ref.prefix)
    if run(cmd("EXISTS", keys.meta, keys.id)):
        return True
    served = {(w.get("prefix"), w.get("queue")) for w in gpu_fleet().list_workers()}
    return (ref.prefix, ref.name) in served


def is_read_only(ref: QueueRef) -> bool:
    """Whether settings forbid every action on this queue."""
    entries = conf.get().read_only_queues
    return "*" in entries or ref.name in entries or ref.key in entries
