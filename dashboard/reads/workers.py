"""The workers page's read model: every worker connected to Redis, Bullpen's
and Node BullMQ's alike, from the connection names BullMQ sets (CLIENT LIST,
as `queues.clients.get_workers` reads them), joined with the heartbeats of
Bullpen's GPU workers (`gpu_workers.Fleet`).

What can be known of a worker depends on what it publishes:

- every BullMQ-protocol worker names its blocking connection
  `{prefix}:{base64(queue)}[:w:{worker name}]`, so its queue, name, address
  (as Redis sees it), connection age and last command are known;
- a Bullpen GPU worker also publishes a heartbeat with its host, pid, slots
  (its concurrency) and running jobs; its connection is named
  `{host}.{queue}.gpu{index}`, which joins the two;
- a plain worker's pid, concurrency and current jobs are not in Redis (BullMQ
  keeps no per-worker record; a job's lock token does not name its worker's
  connection): the page shows the queue's active jobs instead;
- a client library's name and version are in CLIENT LIST (`lib-name`,
  `lib-ver`) only from Redis 7.2 (CLIENT SETINFO) and only where the client
  sends them; older servers list neither.
"""

from __future__ import annotations

import base64
import binascii
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import redis

from queues.clients import QUEUE_EVENTS_SUFFIX, WORKER_SUFFIX, client_lists
from queues.drive import cmd, gather
from queues.keys import QueueKeys

from ..shared.redis import client
from . import gpu_fleet, run
from .discovery import QueueRef


@dataclass
class WorkerRow:
    """One worker as the page lists it; None where it cannot be known."""

    queue: QueueRef
    name: str = ""
    kind: str = "BullMQ worker"
    host: str = ""
    addr: str = ""
    pid: int | None = None
    concurrency: int | None = None
    running: list[dict[str, Any]] | None = None
    library: str = ""
    age_s: int | None = None
    idle_s: int | None = None
    command: str = ""
    state: str = ""
    #: Whether its connection is in CLIENT LIST (a GPU worker's heartbeat
    #: can outlive it for a few seconds, or precede it).
    connected: bool = True


@dataclass
class QueueWorkers:
    """A queue's workers and its active jobs (what plain workers run)."""

    queue: QueueRef
    active: int = 0
    workers: list[WorkerRow] = field(default_factory=list)


@dataclass
class WorkersView:
    """The page: workers per queue, and what the server tells of libraries."""

    queues: list[QueueWorkers]
    #: Whether CLIENT LIST has lib-name/lib-ver (Redis 7.2+).
    lib_fields: bool
    #: Whether the server refused CLIENT LIST (managed services may).
    refused: bool

    @property
    def total(self) -> int:
        """Workers listed."""
        return sum(len(q.workers) for q in self.queues)


def parse_worker_name(name: str) -> tuple[QueueRef, str] | None:
    """(queue, worker name) of a worker connection's name, None for any
    other connection (QueueEvents, unnamed, names that are not BullMQ's)."""
    if not name or name.endswith(QUEUE_EVENTS_SUFFIX):
        return None
    base, _, worker = name.partition(WORKER_SUFFIX)
    prefix, colon, encoded = base.rpartition(":")
    if not colon or not prefix or not encoded:
        return None
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
    return QueueRef(prefix, raw.decode(errors="surrogateescape")), worker


def _connected(nodes: list[list[dict[str, str]]]) -> dict[QueueRef, list[WorkerRow]]:
    """Worker connections per queue; on a cluster, per queue those of the
    primary listing the most of them (as get_workers does)."""
    best: dict[QueueRef, list[WorkerRow]] = {}
    for clients in nodes:
        here: dict[QueueRef, list[WorkerRow]] = defaultdict(list)
        for c in clients:
            parsed = parse_worker_name(c.get("name", ""))
            if parsed is None:
                continue
            ref, worker = parsed
            lib = " ".join(v for v in (c.get("lib-name"), c.get("lib-ver")) if v)
            here[ref].append(
                WorkerRow(
                    queue=ref,
                    name=worker,
                    host=c.get("addr", "").rpartition(":")[0],
                    addr=c.get("addr", ""),
                    library=lib,
                    age_s=_int(c.get("age")),
                    idle_s=_int(c.get("idle")),
                    command=c.get("cmd", ""),
                )
            )
        for ref, rows in here.items():
            if len(rows) > len(best.get(ref, [])):
                best[ref] = rows
    return best


def _int(value: str | None) -> int | None:
    try:
        return int(value or "")
    except ValueError:
        return None


def _gpu_name(record: dict[str, Any]) -> str:
    gpu = record.get("gpu") or {}
    return f"{record.get('host')}.{record.get('queue')}.gpu{gpu.get('index')}"


def _record_ref(record: dict[str, Any]) -> QueueRef:
    """The queue of a heartbeat; one written without prefix or queue gets an
    empty one (`QueueRef.odd`: listed, never linked)."""
    return QueueRef(str(record.get("prefix") or ""), str(record.get("queue") or ""))


def _join_gpu(rows: list[WorkerRow], records: list[dict[str, Any]]) -> None:
    """Fill GPU workers' rows from their heartbeats (a record without a
    connection listed is added, marked as not connected)."""
    free: dict[str, list[WorkerRow]] = defaultdict(list)
    for row in rows:
        free[row.name].append(row)
    for rec in sorted(records, key=lambda r: str(r.get("id", ""))):
        matches = free.get(_gpu_name(rec))
        if matches:
            row = matches.pop(0)
        else:
            row = WorkerRow(
                queue=_record_ref(rec), name=_gpu_name(rec), connected=False
            )
            rows.append(row)
        row.kind = "Bullpen GPU worker"
        row.host = str(rec.get("host", row.host))
        row.pid = _int(str(rec.get("pid", "")))
        row.concurrency = _int(str(rec.get("slots", "")))
        row.running = list(rec.get("running") or [])
        row.state = str(rec.get("state", ""))


def workers_view() -> WorkersView:
    """Every connected worker per queue, GPU workers' heartbeats joined in."""
    conn = client()
    try:
        nodes = run(client_lists(), conn)
    except redis.ResponseError:
        nodes = []
    refused = not nodes
    lib_fields = any("lib-name" in c for node in nodes for c in node)
    by_queue = _connected(nodes)
    try:
        records = gpu_fleet().list_workers()
    except redis.RedisError:
        records = []
    for rec in records:
        by_queue.setdefault(_record_ref(rec), [])
    for ref, rows in by_queue.items():
        _join_gpu(rows, [r for r in records if _record_ref(r) == ref])
    refs = sorted(by_queue)
    actives = run(
        gather([cmd("LLEN", QueueKeys(r.name, r.prefix).active) for r in refs])
    )
    queues = [
        QueueWorkers(ref, int(active), sorted(by_queue[ref], key=_order))
        for ref, active in zip(refs, actives)
    ]
    return WorkersView(queues, lib_fields, refused)


def _order(row: WorkerRow) -> tuple[str, str, str]:
    return (row.kind, row.host, row.name)
