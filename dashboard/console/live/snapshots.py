"""What the reader reads on a clock rather than from streams: the counts of
every followed queue (one pipelined round trip for all of them) and the
workers and GPUs snapshot, each as the browser message."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError

from dashboard.console.reads import fleet as fleet_reads
from gpu_workers import Fleet
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


def workers_message(fleet: Fleet) -> dict[str, Any]:
    """The browser's `workers` message: hosts, GPUs and workers running per
    host/queue (the GPU page's scaling table). Blocking: run it in a thread."""
    records = fleet.list_workers()
    return {
        "type": "workers",
        "hosts": fleet_reads.shown_records(records),
        "gpus": fleet.list_gpus(),
        "running": fleet_reads.running_workers(records),
    }
