"""Which queues exist and which the pages may show: `QueueRef`, the queues
configured in settings and those the SCAN for queue keys finds (`CachedDiscovery`,
shared by a process's requests), and the checks every queue URL passes."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import redis

from queues.cluster import hash_tag, is_cluster_client
from queues.discovery import CachedDiscovery, discover_queues
from queues.drive import cmd
from queues.keys import QueueKeys
from queues.names import check_queue_name, qualified_name

from . import conf
from . import redis as pages_redis
from .reads import fleet_snapshot, on_reset, run

log = logging.getLogger(__name__)


# --- which queues exist ------------------------------------------------------
@dataclass(frozen=True, order=True)
class QueueRef:
    """A queue's key prefix and name."""

    prefix: str
    name: str
    #: Why the pages cannot read it though its name is fine (see `slotless`).
    unreadable: str = field(default="", compare=False)

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
        if self.unreadable:
            return self.unreadable
        if not self.prefix or not self.name:
            return "its prefix or name is unknown"
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


def _scan(conn: redis.Redis, prefixes: Sequence[str]) -> list[tuple[str, str]]:
    return discover_queues(conn, prefixes)  # looked up here: tests replace it


#: The pages' discovery: one SCAN's result shared by a process's requests.
_discovery = CachedDiscovery(
    lambda: conf.get().prefixes,
    lambda: conf.get().discovery_ttl_s,
    lambda: conf.get().redis_timeout_s,
    _scan,
)
on_reset(_discovery.reset)


def discovered_queues() -> list[QueueRef]:
    """The queues SCAN found with the configured prefixes (cached, see
    `queues.discovery.CachedDiscovery`)."""
    return [QueueRef(p, n) for p, n in _discovery.get(pages_redis.client())]


def discovery_complete() -> bool:
    """Whether the discovered queues come from a complete scan (not, while
    a process's first scan of a large keyspace runs, from the registry)."""
    return _discovery.complete()


def prewarm_discovery() -> None:
    """Scan for queues in the background now, so the first page need not wait
    (the server calls this when it starts; a dead Redis only logs)."""
    _discovery.prewarm(pages_redis.client())


#: Why a queue without a hash tag cannot be read on a Redis Cluster.
SLOTLESS = "on a Redis Cluster its keys need a hash tag, as {name} or prefix {bull}"


def slotless(ref: QueueRef) -> bool:
    """Whether the pages' Redis is a cluster on which this queue's keys
    would not share a slot: its scripts would fail there (CROSSSLOT)."""
    return hash_tag(f"{ref.prefix}:{ref.name}:") is None and is_cluster_client(
        pages_redis.client()
    )


def known_queues() -> list[QueueRef]:
    """Configured queues and those found by SCAN that the pages can address,
    sorted (see `odd_queues` for the others)."""
    found = set(discovered_queues()) | set(configured_queues())
    return sorted(ref for ref in found if not ref.odd and not slotless(ref))


def odd_queues() -> list[QueueRef]:
    """Queues found by SCAN that the pages cannot address (`QueueRef.odd`)
    or read (no hash tag on a cluster): the overview lists them apart
    instead of failing on them."""
    odd = [
        ref
        if ref.odd or not slotless(ref)
        else QueueRef(ref.prefix, ref.name, SLOTLESS)
        for ref in discovered_queues()
    ]
    return sorted(ref for ref in odd if ref.odd)


def internal_queues() -> set[QueueRef]:
    """Queues Bullpen itself uses (the webhook deliveries): kept out of the
    operators' queue lists, shown to admins apart and marked internal."""
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
    if slotless(ref):
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
    # The process's fleet snapshot (bounded age), not every worker record:
    # a request for a mistyped queue must not read the whole fleet.
    return ref.key in fleet_snapshot().per_queue


def is_read_only(ref: QueueRef) -> bool:
    """Whether settings forbid every action on this queue."""
    entries = conf.get().read_only_queues
    return "*" in entries or ref.name in entries or ref.key in entries
