"""What the reader reads on a clock rather than from streams: the counts of
every followed queue (one pipelined round trip for all of them) and the
changes of the fleet snapshot (reads.fleet_snapshot), each as the browser
message."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from gpu_workers.fleet_snapshot import FleetSnapshot
from queues import ops
from queues.drive import cmd, gather, run_async
from queues.keys import QueueKeys


def counts_op(keys: QueueKeys) -> ops.Op:
    """A queue's counts (default states) and whether it is paused: one step."""
    counts, paused = yield from gather(
        [ops.get_counts(keys, ()), cmd("HEXISTS", keys.meta, "paused")]
    )
    return counts, bool(paused)


async def read_counts(client: Any, queues: Sequence[QueueKeys]) -> list[Any]:
    """(counts, paused) of each queue, or the exception its read raised: one
    pipelined round trip for all; when a queue's keys answer an error, each
    queue is read on its own so that the others still go out. The scripts are
    those registered once on `client` (queues.drive.scripts_for)."""
    try:
        return list(await run_async(gather([counts_op(k) for k in queues]), client))
    except ResponseError:
        return await asyncio.gather(
            *(run_async(counts_op(k), client) for k in queues),
            return_exceptions=True,
        )


def counts_message(
    queue_key: str, counts: dict[str, int] | None, paused: bool | None, last_id: str
) -> dict[str, Any]:
    """The browser's `counts` message (its id: where the stream was read to)."""
    return {
        "type": "counts",
        "queue": queue_key,
        "counts": counts,
        "paused": paused,
        "id": last_id,
    }


@dataclass
class WorkersState:
    """What the last `workers` message said, to diff the next against: the
    snapshot's time (its version), the grid's cells, the Running column,
    per host what its cards show of its workers, and the summary."""

    version: int
    cells: dict[str, list[Any]]
    running: dict[str, int]
    hosts: dict[str, tuple[Any, ...]]
    summary: dict[str, int]


def workers_state(snap: FleetSnapshot) -> WorkersState:
    """A snapshot as the live message sees it."""
    cells = {}
    for i in range(len(snap.gpus)):
        cell = snap.cell(i)
        cells[f"{cell[0]}/{cell[2]}"] = cell
    hosts = {
        host: tuple(
            (
                str(w.get("id", "")),
                str(w.get("state", "")),
                len(w.get("running") or []),
                w.get("restarts"),
            )
            for w in records
        )
        for host, records in snap.workers_by_host.items()
    }
    return WorkersState(snap.taken_ms, cells, dict(snap.running), hosts, snap.summary)


def workers_message(
    new: WorkersState, old: WorkersState | None
) -> dict[str, Any] | None:
    """The browser's `workers` message: what changed from `old` to `new`
    (None when nothing did), never the whole fleet. `cells`: the grid's
    changed cells (FleetSnapshot.cell), `gone`: keys (`host/uuid`) of GPUs
    no longer listed, `running`: changed counts of workers running per
    host/queue (0 when none is left), `hosts`: hosts whose workers changed,
    `summary`: the fleet's counts. `base` is the version it applies to; a
    page whose grid is at another version fetches the grid again. With no
    `old` (a new socket): the version and summary alone."""
    message: dict[str, Any] = {
        "type": "workers",
        "version": new.version,
        "base": None,
        "cells": [],
        "gone": [],
        "running": {},
        "hosts": [],
        "summary": new.summary,
    }
    if old is None:
        return message
    message["base"] = old.version
    message["cells"] = [c for k, c in new.cells.items() if old.cells.get(k) != c]
    message["gone"] = [k for k in old.cells if k not in new.cells]
    running = {k: n for k, n in new.running.items() if old.running.get(k) != n}
    running.update({k: 0 for k in old.running if k not in new.running})
    message["running"] = running
    message["hosts"] = sorted(
        h for h in {*new.hosts, *old.hosts} if new.hosts.get(h) != old.hosts.get(h)
    )
    changed = any(message[k] for k in ("cells", "gone", "running", "hosts"))
    if not changed and new.summary == old.summary:
        return None
    return message
