"""A batch's record in Redis, under Bullpen's namespace (never a BullMQ key):

- `{ns}:batch:{id}` (hash, TTL once ended): what, the snapshot bound, the
  cursor, the counts, status, who, when (fields of `Batch`)
- `{ns}:batch:{id}:lease` (string, PX): the process running it; a batch
  whose lease expired is taken over by the next runner that looks
- `{ns}:batches:running` (set): ids of batches not ended, for that look
- `{ns}:batches:{prefix}:{queue}` (zset): id -> start ms, the queue page
  shows the newest
- `{ns}:batches:{prefix}:{queue}:current` (string): the id of the queue's
  newest batch; a new one may start only while that one is not running
  (`reserve`, atomic, so two clicks cannot start two)
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, fields
from typing import Any

import redis

from ..shared import conf
from ..shared import redis as pages_redis

#: Seconds a batch's lease lasts without renewal (each step renews it).
LEASE_S = 15
#: Seconds an ended batch's record is kept (its audit row stays for good).
KEEP_ENDED_S = 24 * 3600
#: Batches remembered per queue.
KEEP_PER_QUEUE = 20
#: Milliseconds a reservation holds before its batch is stored.
RESERVED_MS = 10_000
RUNNING, DONE, CANCELLED, FAILED = "running", "done", "cancelled", "failed"


@dataclass
class Batch:
    """One batch: a verb over the jobs of one state as they were at its start."""

    id: str
    prefix: str
    queue: str
    verb: str
    state: str
    #: Snapshot bound: the highest score acted on (a sorted set), "" (a list).
    bound: str
    #: Jobs in the state within the bound when the batch started.
    total: int
    done: int = 0
    skipped: int = 0
    errors: int = 0
    #: Cursor: jobs within the bound left in place (errors), passed over.
    offset: int = 0
    status: str = RUNNING
    username: str = ""
    audit_id: int = 0
    started_ms: int = 0
    ended_ms: int = 0
    cancel_by: str = ""
    last_error: str = ""

    @property
    def key(self) -> str:
        """The queue's `prefix:name`."""
        return f"{self.prefix}:{self.queue}"

    @property
    def seen(self) -> int:
        """Jobs acted on or passed over so far."""
        return self.done + self.skipped + self.errors

    @property
    def pct(self) -> float:
        """Progress in percent (100 once ended)."""
        if self.status != RUNNING:
            return 100.0
        return min(100.0, 100.0 * self.seen / self.total) if self.total else 0.0

    @property
    def running(self) -> bool:
        """Whether it has not ended."""
        return self.status == RUNNING


_INTS = {f.name for f in fields(Batch) if f.type in ("int", int)}


def _ns() -> str:
    return conf.get().namespace


def batch_key(batch_id: str) -> str:
    """The batch's hash."""
    return f"{_ns()}:batch:{batch_id}"


def lease_key(batch_id: str) -> str:
    """The batch's lease."""
    return f"{_ns()}:batch:{batch_id}:lease"


def running_key() -> str:
    """Ids of batches not ended."""
    return f"{_ns()}:batches:running"


def queue_batches_key(prefix: str, queue: str) -> str:
    """A queue's batches by start time."""
    return f"{_ns()}:batches:{prefix}:{queue}"


def current_key(prefix: str, queue: str) -> str:
    """The id of a queue's newest batch."""
    return f"{_ns()}:batches:{prefix}:{queue}:current"


def new_id() -> str:
    """A new batch's id."""
    return secrets.token_hex(8)


def reserve(prefix: str, queue: str, batch_id: str, now_ms: int) -> str | None:
    """Make `batch_id` the queue's current batch unless one runs (or was
    reserved in the last RESERVED_MS and is not stored yet); None when
    reserved, else the id of the batch in the way. Atomic (WATCH on the one
    key), so two requests at once cannot both start one."""
    key = current_key(prefix, queue)
    with _client().pipeline() as pipe:
        try:
            pipe.watch(key)  # type: ignore[no-untyped-call]
            holder, _, at = str(pipe.get(key) or "").partition("|")
            if holder:
                found = load(holder)
                if found is not None and found.running:
                    return holder
                if found is None and now_ms - int(at or 0) < RESERVED_MS:
                    return holder
            pipe.multi()
            pipe.set(key, f"{batch_id}|{now_ms}")
            pipe.execute()
        except redis.WatchError:
            return "?"
    return None


def release(prefix: str, queue: str, batch_id: str) -> None:
    """Give up a reservation that started no batch (if it is still ours)."""
    key = current_key(prefix, queue)
    with _client().pipeline() as pipe:
        try:
            pipe.watch(key)  # type: ignore[no-untyped-call]
            if str(pipe.get(key) or "").startswith(f"{batch_id}|"):
                pipe.multi()
                pipe.delete(key)
                pipe.execute()
        except redis.WatchError:
            pass  # someone else's now


def _client() -> redis.Redis:
    return pages_redis.client()


def from_hash(raw: dict[str, str]) -> Batch | None:
    """A Batch from its hash (None when it is not one of ours: a field
    missing or not a number)."""
    values: dict[str, Any] = {}
    try:
        for f in fields(Batch):
            value = raw.get(f.name, "")
            if f.name in _INTS:
                values[f.name] = int(value or 0)
            else:
                values[f.name] = value
    except ValueError:
        return None
    if not values["id"] or not values["verb"]:
        return None
    return Batch(**values)


def create(batch: Batch) -> Batch:
    """Store a new batch as running (its id made here unless it has one)."""
    batch.id = batch.id or new_id()
    r = _client()
    pipe = r.pipeline(transaction=False)
    pipe.hset(
        batch_key(batch.id),
        mapping={f.name: str(getattr(batch, f.name)) for f in fields(Batch)},
    )
    pipe.sadd(running_key(), batch.id)
    qkey = queue_batches_key(batch.prefix, batch.queue)
    pipe.zadd(qkey, {batch.id: batch.started_ms})
    pipe.zremrangebyrank(qkey, 0, -KEEP_PER_QUEUE - 1)
    pipe.execute()
    return batch


def load(batch_id: str) -> Batch | None:
    """The batch, or None when its record is gone or not ours."""
    raw: dict[str, str] = _client().hgetall(batch_key(batch_id))  # type: ignore[assignment]
    return from_hash(raw) if raw else None


def save(batch: Batch, *names: str) -> None:
    """Write some fields of the batch."""
    _client().hset(
        batch_key(batch.id), mapping={n: str(getattr(batch, n)) for n in names}
    )


def latest(prefix: str, queue: str) -> Batch | None:
    """The queue's newest batch still on record."""
    r = _client()
    for batch_id in r.zrevrange(queue_batches_key(prefix, queue), 0, 2):
        found = load(str(batch_id))
        if found is not None:
            return found
    return None


def running_ids() -> list[str]:
    """Ids of the batches not ended (some perhaps held by other processes)."""
    return sorted(str(i) for i in _client().smembers(running_key()))


def claim(batch_id: str, owner: str) -> bool:
    """Take the batch's lease when nobody holds it (a new batch, or one whose
    runner died: its lease expired)."""
    return bool(_client().set(lease_key(batch_id), owner, nx=True, ex=LEASE_S))


def renew(batch_id: str, owner: str) -> bool:
    """Extend our lease; False when it is no longer ours (expired and taken
    over by another process, which now runs the batch)."""
    r = _client()
    if r.get(lease_key(batch_id)) != owner:
        return False
    r.expire(lease_key(batch_id), LEASE_S)
    return True


def is_leased(batch_id: str) -> bool:
    """Whether some process runs the batch now (its lease is held)."""
    return bool(_client().exists(lease_key(batch_id)))


def forget(batch_id: str) -> None:
    """Drop an id whose record is gone from the running set."""
    _client().srem(running_key(), batch_id)


def request_cancel(batch: Batch, username: str) -> None:
    """Ask the runner to stop the batch after its current chunk."""
    batch.cancel_by = username or "?"
    save(batch, "cancel_by")


def cancel_requested(batch_id: str) -> str:
    """Who asked to cancel the batch ("" when nobody did)."""
    value = _client().hget(batch_key(batch_id), "cancel_by")
    return str(value or "")


def end(batch: Batch, status: str, now_ms: int) -> None:
    """Mark the batch ended: kept a day for the page, out of the running set."""
    batch.status, batch.ended_ms = status, now_ms
    r = _client()
    pipe = r.pipeline(transaction=False)
    pipe.hset(
        batch_key(batch.id),
        mapping={n: str(getattr(batch, n)) for n in ("status", "ended_ms")},
    )
    pipe.expire(batch_key(batch.id), KEEP_ENDED_S)
    pipe.srem(running_key(), batch.id)
    pipe.delete(lease_key(batch.id))
    pipe.execute()
