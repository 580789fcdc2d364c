"""Acting on one job: progress, logs, data, priority, promotion and
reprocessing. Each refuses an id that names one of the queue's own keys, and
raises the exception of a negative script code (`raise_for_code`)."""

from __future__ import annotations

from typing import Any

from .. import codec
from ..exceptions import JobNotFound, raise_for_code
from ..keys import QueueKeys, names_queue_key
from ..state import JobState, parse_state
from .requests import Eval, Op


def _check_id(job_id: str) -> None:
    if names_queue_key(job_id):
        raise JobNotFound(f"{job_id!r} names one of the queue's keys, not a job")


def update_progress(keys: QueueKeys, job_id: str, progress: Any) -> Op[int]:
    """Store a job's progress and emit `progress`; returns 0."""
    _check_id(job_id)
    code = yield Eval(
        "update_progress",
        (keys.job(job_id), keys.events, keys.meta),
        (job_id, codec.dumps(progress)),
    )
    raise_for_code(code, job_id)
    return int(code)


def add_log(keys: QueueKeys, job_id: str, line: str, keep: int | None) -> Op[int]:
    """Append a line to a job's log (keeping the last `keep` lines when
    given); returns the log's length."""
    _check_id(job_id)
    code = yield Eval(
        "add_log",
        (keys.job(job_id), keys.logs(job_id)),
        (line, "" if keep is None else str(keep)),
    )
    raise_for_code(code, job_id)
    return int(code)


def update_data(keys: QueueKeys, job_id: str, data: Any) -> Op[int]:
    """Replace a job's data; returns 0."""
    _check_id(job_id)
    code = yield Eval("update_data", (keys.job(job_id),), (codec.dumps(data),))
    raise_for_code(code, job_id)
    return int(code)


def change_priority(keys: QueueKeys, job_id: str, priority: int, lifo: bool) -> Op[int]:
    """Change a job's priority, re-queueing a waiting job under it; returns 1."""
    _check_id(job_id)
    code = yield Eval(
        "change_priority",
        (
            keys.wait,
            keys.prioritized,
            keys.meta,
            keys.marker,
            keys.pc,
            keys.active,
            keys.job(job_id),
        ),
        (int(priority), job_id, "1" if lifo else "0"),
    )
    raise_for_code(code, job_id)
    return int(code)


def promote(keys: QueueKeys, job_id: str) -> Op[int]:
    """Move a delayed job to run now; returns 0."""
    _check_id(job_id)
    code = yield Eval(
        "promote",
        (
            keys.delayed,
            keys.wait,
            keys.prioritized,
            keys.events,
            keys.meta,
            keys.pc,
            keys.marker,
            keys.active,
        ),
        (keys.base, job_id),
    )
    raise_for_code(code, job_id, "delayed")
    return int(code)


def reprocess(
    keys: QueueKeys,
    job_id: str,
    state: str | JobState,
    lifo: bool,
    reset_attempts_made: bool,
    reset_attempts_started: bool,
) -> Op[int]:
    """Move a failed (or completed) job back to wait; returns 1."""
    _check_id(job_id)
    st = parse_state(state)
    code = yield Eval(
        "reprocess_job",
        (
            keys.job(job_id),
            keys.events,
            keys.state(st),
            keys.wait,
            keys.meta,
            keys.marker,
            keys.active,
            keys.prioritized,
            keys.pc,
        ),
        (
            job_id,
            "1" if lifo else "0",
            "failedReason" if st is JobState.FAILED else "returnvalue",
            st.value,
            "1" if reset_attempts_made else "0",
            "1" if reset_attempts_started else "0",
        ),
    )
    raise_for_code(code, job_id, st.value)
    return int(code)
