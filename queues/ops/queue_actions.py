"""Acting on a whole queue: pause/resume, drain, clean, obliterate, bulk
retry and promote, and removing one job (with its children)."""

from __future__ import annotations

from typing import Any

from .. import defaults
from ..exceptions import JobLocked, QueueHasActiveJobs, QueueNotPaused, raise_for_code
from ..keys import QueueKeys, names_queue_key
from ..state import JobState, parse_state
from .requests import Atomic, Cmd, Eval, Op, now_ms


def pause(keys: QueueKeys, paused: bool) -> Op[None]:
    """Pause, or resume and migrate a legacy `paused` list in chunks."""
    pause_keys = (
        keys.wait,
        keys.paused,
        keys.meta,
        keys.prioritized,
        keys.events,
        keys.delayed,
        keys.marker,
    )
    remaining = yield Eval(
        "pause", pause_keys, ("paused" if paused else "resumed", "1")
    )
    while int(remaining) > 0:
        remaining = yield Eval("pause", pause_keys, ("resumed", "0"))
    return None


def clean(
    keys: QueueKeys, grace_ms: int, limit: int, state: str | JobState
) -> Op[list[str]]:
    """Remove jobs of a state older than `grace_ms`; returns the removed ids."""
    st = parse_state(state)
    key = keys.state(st)
    cutoff = now_ms() - grace_ms
    removed: list[str] = []
    while True:
        batch = (
            defaults.CLEAN_BATCH
            if not limit
            else min(limit - len(removed), defaults.CLEAN_BATCH)
        )
        ids = yield Eval(
            "clean_jobs_in_set",
            (key, keys.events, keys.repeat),
            (keys.base, cutoff, batch, st.key_suffix),
        )
        removed.extend(ids)
        if len(ids) < batch or (limit and len(removed) >= limit):
            return removed


def obliterate(keys: QueueKeys, force: bool) -> Op[None]:
    """Pause the queue, then delete it and all its jobs in batches."""
    yield from pause(keys, True)
    while True:
        code = yield Eval(
            "obliterate",
            (keys.meta, keys.base),
            (defaults.OBLITERATE_BATCH, "force" if force else ""),
        )
        if code == -1:
            raise QueueNotPaused(f"queue {keys.name} must be paused to obliterate it")
        if code == -2:
            raise QueueHasActiveJobs(
                f"queue {keys.name} has active jobs; pass force=True to obliterate it"
            )
        if code == 0:
            return None


def _move_to_wait(keys: QueueKeys, st: JobState, count: int, max_score: Any) -> Eval:
    """BullMQ's bulk move of up to `count` jobs of `st` with score <=
    max_score to wait; answers 1 while more are left."""
    return Eval(
        "move_jobs_to_wait",
        (keys.events, keys.state(st), keys.wait, keys.meta, keys.marker, keys.active),
        (keys.base, count, max_score, st.value),
    )


def move_jobs_to_wait(
    keys: QueueKeys, state: str, count: int, max_score: Any
) -> Op[None]:
    """Bulk retry (finished states) or promote (delayed), batch after batch."""
    st = parse_state(state)
    while True:
        more = yield _move_to_wait(keys, st, count, max_score)
        if not int(more):
            break
    if st is JobState.DELAYED:
        # Grouped delayed jobs (docs/groups.md): to their groups.
        grouped = Eval(
            "move_jobs_to_wait",
            (
                keys.events,
                keys.groups_delayed,
                keys.wait,
                keys.meta,
                keys.marker,
                keys.active,
            ),
            (keys.base, count, "+inf", st.value),
        )
        while int((yield grouped)):
            pass
    return None


def move_jobs_to_wait_once(
    keys: QueueKeys, state: str, count: int, max_score: Any
) -> Op[int]:
    """One batch of `move_jobs_to_wait`: up to `count` jobs of the state
    with score <= max_score moved to wait; returns how many (fewer than
    `count`: none are left). A caller that stops between batches (a
    dashboard batch, throttled and cancellable) drives it step by step."""
    st = parse_state(state)
    counted, _ = yield Atomic(
        [
            Cmd(("ZCOUNT", keys.state(st), 0, max_score)),
            _move_to_wait(keys, st, count, max_score),
        ]
    )
    return min(int(counted), count)


def remove(keys: QueueKeys, job_id: str, remove_children: bool = True) -> Op[bool]:
    """Remove a job from any state (with its children unless told otherwise);
    False when it did not exist."""
    if names_queue_key(job_id):  # never a job: its "hash" is a queue key
        return False
    code = yield Eval(
        "remove_job",
        (keys.job(job_id), keys.events, keys.meta),
        (keys.base, job_id, now_ms(), "1" if remove_children else "0"),
    )
    if code == 0:
        raise JobLocked(
            f"job {job_id} or one of its pending children is locked by a worker"
            " and cannot be removed"
        )
    if code == -1:
        return False
    raise_for_code(code, job_id)
    return True


def drain(keys: QueueKeys, delayed: bool) -> Op[int]:
    """Delete waiting and prioritized jobs (and delayed ones when asked),
    `defaults.DRAIN_BATCH` a call, so that Redis serves its other clients
    between calls (jobs added meanwhile may go too); returns how many."""
    total = 0
    while True:
        removed, more = yield Eval(
            "drain",
            (keys.wait, keys.paused, keys.prioritized, keys.delayed, keys.pc),
            (keys.base, "1" if delayed else "0", defaults.DRAIN_BATCH),
        )
        total += int(removed)
        if not int(more):
            return total


def set_meta(keys: QueueKeys, *fields: Any) -> Op[None]:
    """Set fields (name, value, ...) of the queue's meta hash."""
    yield Cmd(("HSET", keys.meta, *fields))
    return None


def del_meta(keys: QueueKeys, *names: str) -> Op[None]:
    """Delete fields of the queue's meta hash."""
    yield Cmd(("HDEL", keys.meta, *names))
    return None


#: What a manual rate limit sets the limiter to (BullMQ: Number.MAX_SAFE_INTEGER):
#: a count no limit's max reaches under.
MANUAL_LIMIT = 2**53 - 1


def rate_limit(keys: QueueKeys, expire_ms: int) -> Op[None]:
    """Hold the queue's rate limit full for `expire_ms` (BullMQ's
    `queue.rateLimit`): workers with a limiter, or on a queue with a global
    rate limit, claim nothing until it expires."""
    yield Cmd(("SET", keys.limiter, MANUAL_LIMIT, "PX", expire_ms))
    return None


def rate_limit_ttl(keys: QueueKeys, max_jobs: int | None) -> Op[int]:
    """get_rate_limit_ttl.lua: ms the rate limit holds claims still."""
    ttl: int = yield Eval(
        "get_rate_limit_ttl", (keys.limiter, keys.meta), (max_jobs or 0,)
    )
    return int(ttl)


def remove_rate_limit_key(keys: QueueKeys) -> Op[int]:
    """Delete the limiter (its count and any manual limit); 1 if there was one."""
    removed: int = yield Cmd(("DEL", keys.limiter))
    return int(removed)
