"""One chunk of a batch, through the queue core's operations: a retry or
promote is one `move_jobs_to_wait_once` (BullMQ's bulk move, bounded by the
snapshot score); a remove reads one chunk of ids within the bound and
removes them in one pipeline of `remove` calls. Nothing here writes a
BullMQ key by hand."""

from __future__ import annotations

from dataclasses import dataclass

from queues import ops
from queues.drive import cmd, gather, guarded
from queues.exceptions import QueueError
from queues.keys import QueueKeys
from queues.state import parse_state

from ..reads import run
from .records import Batch
from .selection import VERBS

#: Batch verbs and the states (tabs) each may act on: those of a selection
#: but Cancel (a request to each job's GPU worker, never a batch).
BATCH_VERBS = {verb: states for verb, states in VERBS.items() if verb != "cancel"}
#: States kept in sorted sets whose score only grows for newcomers (their
#: finish time): the bound is "now" when the batch starts.
FINISHED = frozenset({"failed", "completed"})


@dataclass
class Snapshot:
    """What a batch acts on: the bound and how many jobs lie within it."""

    bound: str
    total: int


def snapshot(keys: QueueKeys, state: str, now_ms: int) -> Snapshot:
    """The jobs of `state` now: finished jobs up to now (retried jobs that
    fail again, and jobs failing meanwhile, finish later and stay out), other
    sorted sets up to their highest score, a list (waiting) as its length."""
    key = keys.state(parse_state(state))
    if state in FINISHED:
        return Snapshot(str(now_ms), int(run(cmd("ZCOUNT", key, 0, now_ms))))
    if state == "waiting":
        return Snapshot("", int(run(cmd("LLEN", key))))
    top = run(cmd("ZRANGE", key, -1, -1, "WITHSCORES"))
    if not top:
        return Snapshot("0", 0)
    bound = repr(float(top[0][1])) if isinstance(top[0], (list, tuple)) else top[1]
    return Snapshot(str(bound), int(run(cmd("ZCOUNT", key, 0, bound))))


@dataclass
class Stepped:
    """What one chunk did."""

    done: int = 0
    skipped: int = 0
    errors: int = 0
    #: Jobs left in place within the bound (the cursor moves past them).
    stayed: int = 0
    last_error: str = ""
    finished: bool = False


def step(batch: Batch, chunk: int) -> Stepped:
    """Act on the next chunk of the batch; `finished` when none are left."""
    keys = QueueKeys(batch.queue, batch.prefix)
    left = batch.total - batch.seen
    size = max(min(chunk, left), 0)
    if size == 0:
        return Stepped(finished=True)
    if batch.verb in ("retry", "promote"):
        moved = run(ops.move_jobs_to_wait_once(keys, batch.state, size, batch.bound))
        return Stepped(done=moved, finished=moved < size or moved >= left)
    ids = _next_ids(keys, batch, size)
    results = run(gather([guarded(ops.remove(keys, i)) for i in ids]))
    out = Stepped(finished=len(ids) < size or len(ids) >= left)
    for result in results:
        if result is True:
            out.done += 1
        elif isinstance(result, QueueError):
            out.errors += 1
            out.stayed += 1
            out.last_error = str(result)[:300]
        else:  # gone meanwhile, or an id without a hash: passed over
            out.skipped += 1
            out.stayed += 1
    return out


def _next_ids(keys: QueueKeys, batch: Batch, size: int) -> list[str]:
    key = keys.state(parse_state(batch.state))
    start = batch.offset
    if batch.state == "waiting":  # oldest first: from the tail
        found = run(cmd("LRANGE", key, -(start + size), -(start + 1)))
        return [str(i) for i in reversed(found)]
    found = run(cmd("ZRANGEBYSCORE", key, 0, batch.bound, "LIMIT", start, size))
    return [str(i) for i in found]
