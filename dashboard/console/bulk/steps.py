"""One chunk of a batch, through the queue core's operations and the verb's
declaration (shared/verbs.py): a retry or promote is one
`move_jobs_to_wait_once` (BullMQ's bulk move, bounded by the snapshot
score); any other verb reads one chunk of ids within the bound and acts on
them with its operation on many ids (a remove: one pipeline of `remove`
calls). Nothing here writes a BullMQ key by hand.

Where the next chunk starts: a job removed leaves its state, so the cursor
(an offset from the oldest) moves only past jobs left in place; a job a
verb `stays` on (a changed priority, a duplicated job) stays, so the cursor
moves past every one. In `prioritized` such a verb re-queues the job under a
new score, possibly above the cursor: there the cursor is the score acted on
last, and jobs queued after the batch started (the priority counter's mark
tells them) are passed over uncounted."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dashboard.shared.discovery import QueueRef
from dashboard.shared.verbs import VERBS, Verb
from queues import ops
from queues.drive import cmd
from queues.keys import QueueKeys
from queues.state import parse_state

from ..reads import run
from .records import Batch
from .selection import where

#: Batch verbs and the states (tabs) each may act on, as declared (Cancel,
#: a request to each job's GPU worker, has none).
BATCH_VERBS = {n: v.batch_states for n, v in VERBS.items() if v.batch_states}
#: States kept in sorted sets whose score only grows for newcomers (their
#: finish time): the bound is "now" when the batch starts.
FINISHED = frozenset({"failed", "completed"})
#: The low 32 bits of a `prioritized` score: the priority counter.
_COUNTER = 2**32


@dataclass
class Snapshot:
    """What a batch acts on: the bound, how many jobs lie within it, and
    (`prioritized`) the priority counter."""

    bound: str
    total: int
    mark: int = 0


def snapshot(keys: QueueKeys, state: str, now_ms: int) -> Snapshot:
    """The jobs of `state` now: finished jobs up to now (retried jobs that
    fail again, and jobs failing meanwhile, finish later and stay out), other
    sorted sets up to their highest score, a list (waiting) as its length."""
    key = keys.state(parse_state(state))
    if state in FINISHED:
        return Snapshot(str(now_ms), int(run(cmd("ZCOUNT", key, 0, now_ms))))
    if state == "waiting":
        return Snapshot("", int(run(cmd("LLEN", key))))
    mark = int(run(cmd("GET", keys.pc)) or 0) if state == "prioritized" else 0
    top = run(cmd("ZRANGE", key, -1, -1, "WITHSCORES"))
    if not top:
        return Snapshot("0", 0, mark)
    bound = repr(float(top[0][1])) if isinstance(top[0], (list, tuple)) else top[1]
    return Snapshot(str(bound), int(run(cmd("ZCOUNT", key, 0, bound))), mark)


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
    #: The score acted on last (a re-queueing verb over `prioritized`).
    cursor: str = ""


def step(batch: Batch, chunk: int) -> Stepped:
    """Act on the next chunk of the batch; `finished` when none are left."""
    keys = QueueKeys(batch.queue, batch.prefix)
    verb = VERBS[batch.verb]
    left = batch.total - batch.seen
    size = max(min(chunk, left), 0)
    if size == 0:
        return Stepped(finished=True)
    if verb.bulk_move:
        moved = run(ops.move_jobs_to_wait_once(keys, batch.state, size, batch.bound))
        return Stepped(done=moved, finished=moved < size or moved >= left)
    if verb.stays and batch.state == "prioritized":
        ids, read, cursor = _next_by_score(keys, batch, size)
    else:
        ids = _next_ids(keys, batch, size)
        read, cursor = len(ids), ""
    out = _act(batch, verb, ids)
    out.cursor = cursor
    out.finished = read < size or out.done + out.skipped + out.errors >= left
    return out


def _act(batch: Batch, verb: Verb, ids: list[str]) -> Stepped:
    out = Stepped()
    if not ids:
        return out
    params = json.loads(batch.params) if batch.params else {}
    place = where(QueueRef(batch.prefix, batch.queue))
    results = verb.on_ids(place, [(i, batch.state) for i in ids], params)
    for result in results:
        if isinstance(result, Exception):
            out.errors += 1
            out.stayed += 1
            out.last_error = str(result)[:300]
        elif result is True:
            out.done += 1
            out.stayed += verb.stays
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


def _next_by_score(
    keys: QueueKeys, batch: Batch, size: int
) -> tuple[list[str], int, str]:
    """(ids to act on, how many were read, the last score read): the next
    `size` jobs above the cursor within the bound, less the newcomers."""
    low = f"({batch.cursor}" if batch.cursor else "0"
    found = run(
        cmd(
            "ZRANGEBYSCORE",
            keys.prioritized,
            low,
            batch.bound,
            "WITHSCORES",
            "LIMIT",
            0,
            size,
        )
    )
    pairs = [(str(m), float(str(s))) for m, s in _pairs(found)]
    ids = [m for m, s in pairs if int(s) % _COUNTER <= batch.mark]
    return ids, len(pairs), repr(pairs[-1][1]) if pairs else batch.cursor


def _pairs(found: list[object]) -> list[tuple[object, object]]:
    """WITHSCORES replies as pairs (RESP3 answers pairs, RESP2 a flat list)."""
    if found and isinstance(found[0], (list, tuple)):
        return [(p[0], p[1]) for p in found]  # type: ignore[index]
    return list(zip(found[::2], found[1::2]))
