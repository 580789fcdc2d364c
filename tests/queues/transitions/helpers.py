"""Plain helpers for the transition tests: a fixed clock, worker-side script
calls as `queues/worker.py` makes them, and readers of the resulting keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from queues import codec, ops
from queues.drive import run_sync
from queues.keys import QueueKeys
from queues.ops.worker import finish_args
from queues.queue import Queue

#: A fixed "now" (ms) for scripts that take it in ARGV.
NOW = 1_700_000_000_000
TOKEN = "w1"
LOCK_MS = 30_000
STALLED_MS = 30_000


def new_queue(redis_url: str, qname: str) -> Queue:
    """A sync queue on the test server."""
    return Queue(qname, redis_url)


def worker_opts(
    token: str = TOKEN,
    seq: int = 0,
    lock_ms: int = LOCK_MS,
    limiter: dict[str, int] | None = None,
    name: str | None = None,
    fetch: int = 0,
    max_metrics: int | None = None,
    leased: bool = False,
) -> str:
    """The JSON worker opts the worker sends to move_to_active / move_to_finished
    (`leased`: its lease in `groups:leases` was renewed lately)."""
    opts: dict[str, Any] = {
        "token": token,
        "seq": seq,
        "lockDuration": lock_ms,
        "fetch": fetch,
    }
    if limiter:
        opts["limiter"] = limiter
    if name:
        opts["name"] = name
    if max_metrics is not None:
        opts["maxMetricsSize"] = max_metrics
    if leased:
        opts["leased"] = 1
    return codec.dumps(opts)


def claim_keys(k: QueueKeys) -> tuple[str, ...]:
    """KEYS of move_to_active (and the first nine of move_to_finished)."""
    return k.move_to_active_keys()


def move_to_active(q: Queue, now: int = NOW, count: int = 1, **opts: Any) -> list[Any]:
    """Call move_to_active; returns [(id, token, hash) triples, ttl, next delay]."""
    return list(
        q.scripts.move_to_active(
            claim_keys(q.keys), (q.keys.base, now, worker_opts(**opts), count)
        )
    )


def claimed(reply: list[Any]) -> list[tuple[str, str, dict[str, str]]]:
    """The (id, token, hash) triples of a move_to_active reply's first element."""
    flat = reply[0]
    return [
        (flat[i], flat[i + 1], codec.pairs_to_dict(flat[i + 2]))
        for i in range(0, len(flat), 3)
    ]


def entry(
    job_id: str,
    target: str = "completed",
    value: str = "null",
    token: str = f"{TOKEN}:0",
    fields: list[str] | None = None,
    keep: dict[str, int] | None = None,
    attempts: int = 0,
) -> dict[str, Any]:
    """One finished-job entry of move_to_finished, as the worker builds it."""
    e: dict[str, Any] = {
        "id": job_id,
        "token": token,
        "target": target,
        "value": value,
        "attempts": attempts,
        "keep": keep or {"count": -1},
    }
    if fields is not None:
        e["fields"] = fields
    return e


def finish_keys(k: QueueKeys) -> tuple[str, ...]:
    """KEYS of move_to_finished."""
    return k.move_to_finished_keys()


def move_to_finished(
    q: Queue,
    entries: list[dict[str, Any]],
    now: int = NOW,
    history: Sequence[str] | None = None,
    **opts: Any,
) -> list[Any]:
    """Call move_to_finished; returns [codes, claimed flat, ttl, next delay].
    `history`: AttemptRecorder.args() for entries with an attempt record."""
    k = q.keys
    args = (k.base, now, worker_opts(**opts), *finish_args(entries, history))
    return list(q.scripts.move_to_finished(finish_keys(k), args))


def move_to_delayed(
    q: Queue,
    job_id: str,
    delay: int,
    now: int = NOW,
    token: str = f"{TOKEN}:0",
    fields: list[str] | None = None,
    skip_attempt: bool = False,
) -> Any:
    """Call move_to_delayed as the worker's backoff retry does."""
    k = q.keys
    return q.scripts.move_to_delayed(
        (k.active, k.delayed, k.events, k.meta, k.marker, k.stalled),
        (
            k.base,
            now,
            job_id,
            token,
            delay,
            codec.dumps(fields or []),
            "1" if skip_attempt else "0",
        ),
    )


def retry_job(
    q: Queue,
    job_id: str,
    now: int = NOW,
    token: str = f"{TOKEN}:0",
    fields: list[str] | None = None,
    lifo: bool = False,
) -> Any:
    """Call retry_job as the worker's immediate retry does."""
    k = q.keys
    return q.scripts.retry_job(
        (
            k.wait,
            k.active,
            k.prioritized,
            k.events,
            k.delayed,
            k.meta,
            k.pc,
            k.marker,
            k.stalled,
        ),
        (k.base, now, job_id, token, codec.dumps(fields or []), "1" if lifo else "0"),
    )


def move_to_wait(q: Queue, job_id: str, token: str = f"{TOKEN}:0") -> Any:
    """Call move_to_wait as the worker's give-back (MoveToWait) does."""
    return run_sync(ops.move_to_wait(q.keys, job_id, token), q.client, q.scripts)


def extend_locks(
    q: Queue, ids: list[str], tokens: list[str], lock_ms: int = LOCK_MS
) -> list[str]:
    """Call extend_locks as the worker's lock renewal does."""
    return list(
        q.scripts.extend_locks(
            (q.keys.stalled,),
            (q.keys.base, lock_ms, codec.dumps(ids), codec.dumps(tokens)),
        )
    )


def move_stalled(
    q: Queue, now: int = NOW, max_stalled: int = 1, interval_ms: int = STALLED_MS
) -> list[str]:
    """Call move_stalled_jobs_to_wait as the worker's stalled check does."""
    k = q.keys
    return list(
        q.scripts.move_stalled_jobs_to_wait(
            (k.stalled, k.wait, k.active, k.stalled_check, k.meta, k.events, k.marker),
            (k.base, now, max_stalled, interval_ms),
        )
    )


def add_active(q: Queue, name: str = "job", now: int = NOW, **options: Any) -> str:
    """Add a job and claim it (token w1:0); returns its id."""
    job = q.add(name, {}, timestamp=now, **options)
    reply = move_to_active(q, now=now)
    assert claimed(reply)[0][0] == job.id
    return str(job.id)


# --- reading keys ---------------------------------------------------------
def events(r: redis.Redis, q: Queue) -> list[dict[str, str]]:
    """Every entry of the events stream, oldest first, as field dicts."""
    return [fields for _, fields in r.xrange(q.keys.events)]


def event_names(r: redis.Redis, q: Queue) -> list[str]:
    """The `event` field of every stream entry, oldest first."""
    return [e["event"] for e in events(r, q)]


def clear_events(r: redis.Redis, q: Queue) -> None:
    """Forget the events emitted so far (to look at one transition's)."""
    r.delete(q.keys.events)


def zset(r: redis.Redis, key: str) -> list[tuple[str, float]]:
    """A sorted set as (member, score) pairs, lowest score first."""
    return [(m, s) for m, s in r.zrange(key, 0, -1, withscores=True)]


def markers(r: redis.Redis, q: Queue) -> dict[str, float]:
    """The marker ZSET as {member: score}."""
    return dict(zset(r, q.keys.marker))


def lst(r: redis.Redis, key: str) -> list[str]:
    """A list from head (left) to tail (right)."""
    return list(r.lrange(key, 0, -1))


def job_hash(r: redis.Redis, q: Queue, job_id: str) -> dict[str, str]:
    """The job hash as stored."""
    return dict(r.hgetall(q.keys.job(job_id)))


def queue_keys(r: redis.Redis, q: Queue) -> set[str]:
    """Every existing key under the queue's base."""
    return set(r.scan_iter(match=q.keys.base + "*", count=1000))


def write_job(r: redis.Redis, q: Queue, job_id: str, **fields: Any) -> str:
    """Write a job hash by hand (as another client or an older version would)."""
    h: dict[str, Any] = {
        "name": "hand",
        "data": "{}",
        "opts": "{}",
        "timestamp": NOW,
        "delay": 0,
        "priority": 0,
    }
    h.update(fields)
    r.hset(q.keys.job(job_id), mapping=h)
    return job_id


def delayed_score(due: int, n: int = 0) -> int:
    """The delayed ZSET score of the n-th job due at `due` ms."""
    return due * 4096 + n


def priority_score(priority: int, counter: int) -> int:
    """The prioritized ZSET score of a job with this priority and pc counter."""
    return priority * 2**32 + counter
