"""The Redis page's read model: what each server (each primary of a cluster)
says of itself in INFO, its slowlog, and its keys per prefix.

Keys per prefix stay cheap at any size: a few SCAN calls with a budget
(`SCAN_CALLS` of `SCAN_COUNT`) sample the keyspace; when the SCAN ends within
the budget the counts are exact, otherwise they are the sample's shares of
DBSIZE and marked as estimates. SCAN walks the hash table's buckets, which
hash order makes a fair sample of the keys.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from queues.cluster import is_cluster_client
from queues.sentinel import is_sentinel_client

from ..shared.redis import client
from .server import NodeInfo, primaries

#: SCAN calls and keys asked per call when sampling keys per prefix.
SCAN_CALLS = 4
SCAN_COUNT = 1000
#: Slowlog entries read per server.
SLOWLOG_ENTRIES = 25
#: What a slowlog entry's arguments are cut to for a page.
ARG_CHARS = 48
ARGS_SHOWN = 8
#: Memory use over maxmemory from which the page warns.
MEMORY_WARN_RATIO = 0.8
#: Where no colon ends a prefix.
NO_PREFIX = "(no prefix)"


@dataclass(frozen=True)
class PrefixCount:
    """Keys whose name starts with `prefix:` (an estimate unless exact)."""

    prefix: str
    keys: int
    share: float


@dataclass(frozen=True)
class SlowEntry:
    """One slowlog entry: the command, cut and escaped by the template."""

    id: int
    at: datetime
    duration_us: int
    command: str
    args: list[str]
    more_args: int
    client: str
    client_name: str


@dataclass
class ServerPanel:
    """What the Redis page shows of one server (one primary of a cluster)."""

    node: str
    info: dict[str, Any]
    dbsize: int
    sampled: int
    exact: bool
    prefixes: list[PrefixCount] = field(default_factory=list)
    slowlog: list[SlowEntry] = field(default_factory=list)
    slowlog_len: int = 0
    #: Whether the server refused SLOWLOG (an ACL or a managed service).
    slowlog_refused: bool = False
    #: CONFIG GET save ("" when RDB snapshots are off; None when refused).
    rdb_schedule: str | None = None

    def _num(self, name: str) -> float:
        return NodeInfo(self.node, self.info).number(name)

    @property
    def version(self) -> str:
        """redis_version."""
        return str(self.info.get("redis_version", "?"))

    @property
    def uptime_ms(self) -> int:
        """uptime_in_seconds, in milliseconds (for the duration filter)."""
        return int(self._num("uptime_in_seconds")) * 1000

    @property
    def used_memory(self) -> int:
        """used_memory, bytes."""
        return int(self._num("used_memory"))

    @property
    def maxmemory(self) -> int:
        """maxmemory, bytes (0: no limit)."""
        return int(self._num("maxmemory"))

    @property
    def memory_ratio(self) -> float | None:
        """used_memory / maxmemory, or None without a limit."""
        return self.used_memory / self.maxmemory if self.maxmemory else None

    @property
    def memory_pct(self) -> int:
        """The memory bar's width, 0 to 100."""
        ratio = self.memory_ratio or 0.0
        return min(100, round(ratio * 100))

    @property
    def memory_warning(self) -> bool:
        """Whether memory use reached MEMORY_WARN_RATIO of maxmemory."""
        ratio = self.memory_ratio
        return ratio is not None and ratio >= MEMORY_WARN_RATIO

    @property
    def policy(self) -> str:
        """maxmemory_policy."""
        return str(self.info.get("maxmemory_policy", ""))

    @property
    def policy_warning(self) -> bool:
        """Whether Redis may evict keys (queues need noeviction)."""
        return self.policy != "noeviction"

    @property
    def fragmentation(self) -> float:
        """mem_fragmentation_ratio."""
        return self._num("mem_fragmentation_ratio")

    @property
    def clients(self) -> int:
        """connected_clients."""
        return int(self._num("connected_clients"))

    @property
    def blocked_clients(self) -> int:
        """blocked_clients (workers waiting for jobs among them)."""
        return int(self._num("blocked_clients"))

    @property
    def ops_per_sec(self) -> int:
        """instantaneous_ops_per_sec."""
        return int(self._num("instantaneous_ops_per_sec"))

    @property
    def persistence(self) -> dict[str, Any]:
        """RDB and AOF state from INFO persistence."""
        last = int(self._num("rdb_last_save_time"))
        return {
            "loading": bool(self._num("loading")),
            "rdb_changes": int(self._num("rdb_changes_since_last_save")),
            "rdb_last_save": datetime.fromtimestamp(last, UTC) if last else None,
            "rdb_status": str(self.info.get("rdb_last_bgsave_status", "")),
            "rdb_saving": bool(self._num("rdb_bgsave_in_progress")),
            "aof_enabled": bool(self._num("aof_enabled")),
            "aof_status": str(self.info.get("aof_last_write_status", "")),
            "aof_rewriting": bool(self._num("aof_rewrite_in_progress")),
        }

    @property
    def persistence_warning(self) -> bool:
        """Whether the last RDB save or AOF write failed."""
        p = self.persistence
        return p["rdb_status"] not in ("ok", "") or p["aof_status"] not in ("ok", "")


def mode(conn: Any) -> str:
    """single, sentinel or cluster: how the dashboard reaches Redis."""
    if is_cluster_client(conn):
        return "cluster"
    if is_sentinel_client(conn):
        return "sentinel"
    return "single"


def prefix_of(key: str) -> str:
    """What a key's name holds before its first colon."""
    head, colon, _ = key.partition(":")
    return head if colon else NO_PREFIX


def sample_prefixes(conn: Any, dbsize: int) -> tuple[list[PrefixCount], int, bool]:
    """Keys per prefix of one server of `dbsize` keys: (counts, keys
    sampled, exact)."""
    seen: set[str] = set()
    cursor: Any = 0
    exact = False
    for _ in range(SCAN_CALLS):
        cursor, keys = conn.scan(cursor, count=SCAN_COUNT)
        seen.update(keys)
        if int(cursor) == 0:
            exact = True
            break
    counts = Counter(prefix_of(k) for k in seen)
    sampled = len(seen)
    rows = []
    for prefix, n in counts.most_common():
        share = n / sampled
        keys = n if exact else round(share * dbsize)
        rows.append(PrefixCount(prefix, keys, share))
    return rows, sampled, exact


def _cut(arg: Any) -> str:
    text = arg if isinstance(arg, str) else repr(arg)
    return text if len(text) <= ARG_CHARS else text[: ARG_CHARS - 1] + "…"


def parse_slowlog(reply: list[Any]) -> list[SlowEntry]:
    """SLOWLOG GET's raw reply, each argument cut. Read raw ("SLOWLOG",
    "GET"): redis-py's parsed form joins the arguments with spaces, so an
    argument holding one could not be told apart."""
    entries = []
    for e in reply:
        entry_id, start, duration, words = e[:4]
        addr, name = (list(e[4:6]) + ["", ""])[:2]
        args = list(words[1:])
        entries.append(
            SlowEntry(
                id=int(entry_id),
                at=datetime.fromtimestamp(int(start), UTC),
                duration_us=int(duration),
                command=_cut(words[0] if words else "").upper(),
                args=[_cut(a) for a in args[:ARGS_SHOWN]],
                more_args=max(0, len(args) - ARGS_SHOWN),
                client=str(addr),
                client_name=_cut(name),
            )
        )
    return entries


def server_panel(node: str, conn: Any) -> ServerPanel:
    """One server's panel: INFO, DBSIZE, the slowlog and CONFIG GET save in
    one round trip, first (the SCAN's replies would weigh on used_memory),
    then the SCAN sample. SLOWLOG and CONFIG may be refused (an ACL, a
    managed service): the panel says so."""
    pipe = conn.pipeline(transaction=False)
    pipe.info()
    pipe.dbsize()
    pipe.execute_command("SLOWLOG", "GET", SLOWLOG_ENTRIES)
    pipe.slowlog_len()
    pipe.config_get("save")
    info, dbsize, slow, slow_len, save = pipe.execute(raise_on_error=False)
    for reply in (info, dbsize):
        if isinstance(reply, Exception):
            raise reply
    prefixes, sampled, exact = sample_prefixes(conn, int(dbsize))
    panel = ServerPanel(node, info, int(dbsize), sampled, exact, prefixes)
    if isinstance(slow, Exception) or isinstance(slow_len, Exception):
        panel.slowlog_refused = True
    else:
        panel.slowlog, panel.slowlog_len = parse_slowlog(slow), int(slow_len)
    if not isinstance(save, Exception):
        panel.rdb_schedule = str(save.get("save", ""))
    return panel


def server_panels() -> tuple[str, list[ServerPanel]]:
    """The mode and the panel of every server (every primary of a cluster)."""
    conn: Any = client()
    return mode(conn), [server_panel(node, c) for node, c in primaries(conn)]
