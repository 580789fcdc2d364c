"""The Redis connections of a queue: the names BullMQ gives them (CLIENT
SETNAME) and the worker listing Node's `getWorkers()` reads from CLIENT LIST.

A worker's connection is named `{prefix}:{base64(queue)}`, or with
`:w:{worker name}` appended when the worker has a name; a QueueEvents
connection ends in `:qe` and is not a worker.

On a Redis Cluster each node lists only its own connections: a worker's
blocking connection sits on the node of its queue's slot, and a named client
may also hold connections to other nodes. So CLIENT LIST is asked of every
primary and, as Node's getWorkers() does on a cluster, a queue's workers are
those of the node listing the most of them.
"""

from __future__ import annotations

import base64
import re
import time
import weakref
from collections import Counter
from typing import Any

from redis.exceptions import NoPermissionError, ResponseError

from .drive import run_sync
from .keys import QueueKeys
from .ops import EveryPrimary, Op

WORKER_SUFFIX = ":w:"
QUEUE_EVENTS_SUFFIX = ":qe"
#: How Redis answers CLIENT LIST where the command is removed or renamed
#: (managed services such as GCP Memorystore do this).
_UNKNOWN_CLIENT = re.compile(r"unknown command ['`]\s*client\s*['`]", re.IGNORECASE)


#: What a cluster client asks a node to learn the cluster's layout. redis-py
#: keeps the connection it first asked open, under the client's name, on
#: whichever node it started from: counted, a worker whose queue sits on that
#: node would count twice.
_LAYOUT = frozenset({"cluster|slots", "cluster|shards", "cluster|nodes"})


def connection_name(prefix: str, queue: str, suffix: str = "") -> str:
    """BullMQ's name for a connection of `queue`: `{prefix}:{base64(queue)}`
    followed by `suffix`."""
    encoded = base64.b64encode(queue.encode(errors="surrogateescape")).decode()
    return f"{prefix}:{encoded}{suffix}"


def worker_connection_name(prefix: str, queue: str, worker_name: str | None) -> str:
    """The name of a worker's connection, which `getWorkers()` lists."""
    suffix = f"{WORKER_SUFFIX}{worker_name}" if worker_name else ""
    return connection_name(prefix, queue, suffix)


def parse_client_list(text: str) -> list[dict[str, str]]:
    """CLIENT LIST as one dict of its `field=value` pairs per connection."""
    clients: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields: dict[str, str] = {}
        for pair in line.split(" "):
            key, _, value = pair.partition("=")
            fields[key] = value
        clients.append(fields)
    return clients


def refused(exc: ResponseError) -> bool:
    """Whether the server refuses CLIENT LIST (removed, renamed or not allowed)."""
    return isinstance(exc, NoPermissionError) or bool(_UNKNOWN_CLIENT.search(str(exc)))


def client_lists() -> Op[list[list[dict[str, str]]]]:
    """CLIENT LIST of the server (of every primary of a cluster), parsed, one
    list per node, less the connections whose last command asked for the
    cluster's layout; [] when the server refuses CLIENT LIST."""
    try:
        replies = yield EveryPrimary(("CLIENT", "LIST"))
    except ResponseError as exc:
        if refused(exc):
            return []
        raise
    return [
        [c for c in parse_client_list(text) if c.get("cmd") not in _LAYOUT]
        for text in replies
    ]


def get_workers(keys: QueueKeys) -> Op[list[dict[str, str]]]:
    """The connected workers of a queue as Node's `getWorkers()` lists them:
    CLIENT LIST fields with `name` = the queue name and `rawname` = the
    connection's name; [] when the server refuses CLIENT LIST. On a cluster,
    those of the primary listing the most of them (see the module)."""
    unnamed = connection_name(keys.prefix, keys.name)
    named = unnamed + WORKER_SUFFIX
    best: list[dict[str, str]] = []
    for node in (yield from client_lists()):
        workers: list[dict[str, str]] = []
        for client in node:
            name = client.get("name", "")
            if name == unnamed or name.startswith(named):
                client["name"] = keys.name
                client["rawname"] = name
                workers.append(client)
        if len(workers) > len(best):
            best = workers
    return best


def census_of(nodes: list[list[dict[str, str]]]) -> Counter[str]:
    """Worker connections per `prefix:base64(name)` from `client_lists()`: on
    a cluster, a queue's count from the primary listing the most of them, as
    `get_workers` takes them."""
    found: Counter[str] = Counter()
    for clients in nodes:
        here: Counter[str] = Counter()
        for c in clients:
            name = c.get("name") or ""
            if WORKER_SUFFIX in name:
                here[name.split(WORKER_SUFFIX, 1)[0]] += 1
            elif name and not name.endswith(QUEUE_EVENTS_SUFFIX):
                here[name] += 1
        found |= here  # the larger count of each name
    return found


#: The newest census of each client and when it was taken (monotonic s).
_censuses: weakref.WeakKeyDictionary[Any, tuple[float, Counter[str] | None]] = (
    weakref.WeakKeyDictionary()
)


def recent_census(conn: Any, max_age_s: float) -> Counter[str] | None:
    """`census_of(client_lists())` on a sync client, reused while younger
    than `max_age_s`: pages, scrapes and API calls of one process cost one
    CLIENT LIST per primary every few seconds, however many ask. None when
    the server refuses CLIENT LIST (the workers are unknown)."""
    now = time.monotonic()
    cached = _censuses.get(conn)
    if cached is not None and now - cached[0] < max_age_s:
        return cached[1]
    try:
        nodes = run_sync(client_lists(), conn)
        found = census_of(nodes) if nodes else None
    except ResponseError:
        found = None
    _censuses[conn] = (now, found)
    return found


def forget_censuses() -> None:
    """Drop every kept census (the next asks CLIENT LIST again)."""
    _censuses.clear()
