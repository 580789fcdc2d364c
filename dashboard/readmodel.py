"""The dashboard's read model over the queues API and the worker registry.

Pages read Redis only through here and its siblings (`overviewmodel`,
`jobmodel`, `fleetmodel`). Per-queue reads are written as `queues.ops`
generators and run together with `gather`, so the overview of 100 queues costs
three pipelined round trips, not hundreds; every list reads one page. This
module holds the client, `gather`/`run`, which queues exist (discovery) and
the queue page's reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings

from dashboard import redis as redis_client

# Re-exported while the pages move to dashboard.redis / queues.drive.
from dashboard.redis import REDIS_DOWN as REDIS_DOWN
from dashboard.redis import client as client
from dashboard.redis import connect as connect
from dashboard.redis import queue as queue
from gpu_workers import Fleet
from queues import Job, JobState, drive, ops
from queues.discovery import discover_queues
from queues.drive import cmd as cmd
from queues.drive import cmds as cmds
from queues.drive import gather as gather
from queues.drive import guarded as guarded
from queues.keys import QueueKeys
from queues.names import check_queue_name
from queues.ops import DEFAULT_STATES

log = logging.getLogger(__name__)


def fleet() -> Fleet:
    """The GPU worker registry on the shared client."""
    return Fleet(client(), settings.BULLPEN_NAMESPACE)


#: Clearers of caches that other read-model modules keep (see `on_reset`).
_resets: list[Callable[[], None]] = []


def on_reset(clear: Callable[[], None]) -> None:
    """Have `reset` also call `clear` (a module's own cache)."""
    _resets.append(clear)


def reset() -> None:
    """Forget the client and every cache (tests point settings elsewhere)."""
    redis_client.reset()
    _discovery.reset()
    for clear in _resets:
        clear()


# --- running several ops in one round trip ----------------------------------
def run(op: ops.Op, conn: redis.Redis | None = None) -> Any:
    """Drive an op (usually a `gather`) on `conn`, by default the shared
    client."""
    return drive.run_sync(op, conn or client())


# --- which queues exist ------------------------------------------------------
@dataclass(frozen=True, order=True)
class QueueRef:
    """A queue's key prefix and name."""

    prefix: str
    name: str

    @property
    def key(self) -> str:
        """`prefix:name`, as the live updates name queues."""
        return f"{self.prefix}:{self.name}"

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


def parse_entry(entry: str) -> QueueRef:
    """`name` (first configured prefix) or `prefix:name`."""
    prefix, _, name = entry.rpartition(":")
    return QueueRef(prefix or settings.BULLPEN_PREFIXES[0], name)


def configured_queues() -> list[QueueRef]:
    """Queues named in settings, shown even before they exist."""
    return [parse_entry(e) for e in settings.BULLPEN_QUEUES]


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
        cap = settings.BULLPEN_DISCOVERY_TTL_S
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
            ours = self.client is conn and settings.BULLPEN_DISCOVERY_TTL_S > 0
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
            waiting.wait(settings.BULLPEN_REDIS_TIMEOUT_S)
            with self.lock:
                if self.found is not None and self.client is conn:
                    return self.found
                done = self._start(conn)  # that scan failed: try here
        self._scan(conn, done)
        with self.lock:
            return self.found if self.found is not None else []


_discovery = Discovery(lambda: settings.BULLPEN_PREFIXES)


def discovered_queues() -> list[QueueRef]:
    """The queues SCAN found with the configured prefixes (cached, see
    `Discovery`)."""
    return _discovery.get(client())


def prewarm_discovery() -> None:
    """Scan for queues in the background now, so the first page need not wait
    (the server calls this when it starts; a dead Redis only logs)."""
    _discovery.prewarm(client())


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
    from .api import conf  # the API's settings; it imports this module

    api = conf.get()
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
    return ref.prefix in settings.BULLPEN_PREFIXES or ref in configured_queues()


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
    served = {(w.get("prefix"), w.get("queue")) for w in fleet().list_workers()}
    return (ref.prefix, ref.name) in served


def is_read_only(ref: QueueRef) -> bool:
    """Whether settings forbid every action on this queue."""
    entries = settings.BULLPEN_READ_ONLY_QUEUES
    return "*" in entries or ref.name in entries or ref.key in entries


def queue_counts(refs: Sequence[QueueRef], *states: str) -> list[dict[str, int]]:
    """Counts per state of several queues in one round trip."""
    counts: list[dict[str, int]] = run(
        gather(
            [
                ops.get_counts(QueueKeys(r.name, r.prefix), states or DEFAULT_STATES)
                for r in refs
            ]
        )
    )
    return counts


# --- one queue -----------------------------------------------------------------
@dataclass
class QueueHeader:
    """Counts, paused flag and global limits of one queue."""

    counts: dict[str, int]
    paused: bool
    concurrency: int | None
    rate_max: int | None
    rate_duration_ms: int | None


def queue_header(ref: QueueRef) -> QueueHeader:
    """What the queue page shows above its job list (one round trip)."""
    keys = QueueKeys(ref.name, ref.prefix)
    counts, meta = run(
        gather([ops.get_counts(keys, DEFAULT_STATES), cmd("HGETALL", keys.meta)])
    )
    meta = meta or {}

    def num(name: str) -> int | None:
        value = meta.get(name)
        return int(value) if value and value.lstrip("-").isdigit() else None

    return QueueHeader(
        counts, "paused" in meta, num("concurrency"), num("max"), num("duration")
    )


def page(
    ref: QueueRef, states: Sequence[str], start: int, end: int, asc: bool
) -> list[Job]:
    """One page of jobs across states, O(page) in Redis; values over
    BULLPEN_LIST_VALUE_MAX_BYTES are left out (Job.left_out)."""
    jobs: list[Job] = queue(ref.prefix, ref.name).get_jobs(
        list(states),
        start,
        end,
        asc,
        max_value_bytes=settings.BULLPEN_LIST_VALUE_MAX_BYTES,
    )
    return jobs


def page_with_states(
    ref: QueueRef, states: Sequence[str], start: int, end: int, asc: bool
) -> list[tuple[Job, str]]:
    """`page` with each job's state, read in the same atomic step as its
    fields (a row never says "completed" beside the fields of before). One
    state's rows do not show it: they are that page, without the state read
    (an LPOS over `wait` per waiting job)."""
    if len(states) == 1:
        return [(job, states[0]) for job in page(ref, states, start, end, asc)]
    pairs: list[tuple[Job, JobState]] = queue(
        ref.prefix, ref.name
    ).get_jobs_with_states(
        list(states),
        start,
        end,
        asc,
        max_value_bytes=settings.BULLPEN_LIST_VALUE_MAX_BYTES,
    )
    return [(job, state.value) for job, state in pairs]
