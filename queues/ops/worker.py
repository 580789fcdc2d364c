"""A worker's transitions: claiming jobs and finishing them (with the claim
of the next ones) and retrying them, each one script call the worker sends
exactly once; and its upkeep: renewing its locks, the stalled check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import codec
from ..keys import QueueKeys
from .requests import Cmd, Eval, Op


def claim(
    claim_keys: Sequence[str], base: str, now: int, worker_opts: str, count: int
) -> Op[Any]:
    """Move up to `count` jobs to active under the worker's lock; returns
    move_to_active's reply: [flat id, token, fields triples, rate-limit ttl,
    next delayed due time]. `claim_keys`: QueueKeys.move_to_active_keys()."""
    return (yield Eval("move_to_active", claim_keys, (base, now, worker_opts, count)))


def finish(
    finish_keys: Sequence[str],
    base: str,
    now: int,
    worker_opts: str,
    entries: Sequence[dict[str, Any]],
    history: Sequence[str] | None = None,
) -> Op[Any]:
    """Save finished jobs (`entries`, as the worker's Finisher makes them) and
    claim the next ones as the worker opts' `fetch` says; returns
    move_to_finished's reply: [a code per entry, then as claim's].
    `finish_keys`: QueueKeys.move_to_finished_keys(); `history`: where the
    entries' attempt records go (AttemptRecorder.args(); None: no records)."""
    args = (base, now, worker_opts, *finish_args(entries, history))
    return (yield Eval("move_to_finished", finish_keys, args))


def finish_args(
    entries: Sequence[dict[str, Any]], history: Sequence[str] | None = None
) -> list[str]:
    """move_to_finished's ARGV from its 4th: the entries as JSON; with
    `history`, its three arguments, then each entry's attempt record
    (`attempt`, queues/attempts.py; "" without) as an argument of its own,
    out of the JSON: Redis decodes JSON field by field, and a record would be
    escaped JSON text inside it (with the history's settings, it cost a
    no-op job's finish 12k of its 42k instructions there; every argument
    costs about 1.2k, so a worker without history sends none)."""
    if history is None:
        return [codec.dumps(entries)]
    wire: list[dict[str, Any]] = []
    records: list[str] = []
    for entry in entries:
        sent = dict(entry)
        records.append(sent.pop("attempt", ""))
        wire.append(sent)
    return [codec.dumps(wire), *history, *records]


def retry_later(
    keys: QueueKeys,
    now: int,
    job_id: str,
    token: str | None,
    delay_ms: int,
    fields: list[str],
) -> Op[int]:
    """Move an active job to delayed for `delay_ms`, setting hash `fields`
    (name, value, ...); returns the script's code (0: saved)."""
    code: int = yield Eval(
        "move_to_delayed",
        (keys.active, keys.delayed, keys.events, keys.meta, keys.marker, keys.stalled),
        (keys.base, now, job_id, token, delay_ms, codec.dumps(fields), "0"),
    )
    return code


def retry_now(
    keys: QueueKeys,
    now: int,
    job_id: str,
    token: str | None,
    fields: list[str],
    lifo: bool,
) -> Op[int]:
    """Move an active job back to wait, setting hash `fields`; returns the
    script's code (0: saved)."""
    code: int = yield Eval(
        "retry_job",
        (
            keys.wait,
            keys.active,
            keys.prioritized,
            keys.events,
            keys.delayed,
            keys.meta,
            keys.pc,
            keys.marker,
            keys.stalled,
        ),
        (keys.base, now, job_id, token, codec.dumps(fields), "1" if lifo else "0"),
    )
    return code


def move_to_wait(
    keys: QueueKeys, job_id: str, token: str | None, limit_ms: int | None = None
) -> Op[int]:
    """Give an active job back to the front of the line, its attempts
    untouched, and with `limit_ms` hold the queue's rate limit full for that
    long (BullMQ's manual `rateLimit`); returns the script's code (>= 0:
    moved, the rate limiter's PTTL)."""
    args: tuple[Any, ...] = (keys.base, job_id, token)
    if limit_ms:
        args += (limit_ms,)
    code: int = yield Eval(
        "move_to_wait",
        (
            keys.wait,
            keys.active,
            keys.prioritized,
            keys.events,
            keys.meta,
            keys.pc,
            keys.marker,
            keys.stalled,
            keys.limiter,
        ),
        args,
    )
    return code


def extend_locks(
    keys: QueueKeys, duration_ms: int, held: dict[str, str | None]
) -> Op[list[str]]:
    """Renew the locks of the jobs in `held` ({id: token}) in one call;
    returns the ids whose lock was lost."""
    ids, tokens = codec.dumps(list(held)), codec.dumps(list(held.values()))
    lost: list[str] = yield Eval(
        "extend_locks",
        (keys.stalled,),
        (keys.base, duration_ms, ids, tokens),
    )
    return lost


def move_stalled(
    keys: QueueKeys, now: int, max_stalled_count: int, stalled_interval_ms: int
) -> Op[list[str]]:
    """The stalled check: move jobs whose lock lapsed back to wait (marking
    those stalled too often to fail); returns their ids."""
    moved: list[str] = yield Eval(
        "move_stalled_jobs_to_wait",
        (
            keys.stalled,
            keys.wait,
            keys.active,
            keys.stalled_check,
            keys.meta,
            keys.events,
            keys.marker,
        ),
        (keys.base, now, max_stalled_count, stalled_interval_ms),
    )
    return moved


def count_marked_to_fail(keys: QueueKeys, job_ids: Sequence[str]) -> Op[int]:
    """How many of the jobs carry a deferred failure (`defa`)."""
    marked = yield [Cmd(("HEXISTS", keys.job(i), "defa")) for i in job_ids]
    return sum(1 for m in marked if m)
