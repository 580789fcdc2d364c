"""Queue and job operations written once, without I/O.

Each operation is a generator that yields Redis requests (`Cmd`, `Eval`, a
list of them to send as one pipeline, `Atomic` or `EveryPrimary`) and
receives their replies;
`queues.drive` drives them on a sync or an asyncio client (see
`queues.driver` for how `Queue`, `AsyncQueue` and `Job` hand them over). A
Redis error reply is raised inside the generator at its `yield`, so an
operation may answer it (one not caught there reaches the caller unchanged).

The modules, by role: `requests` (the vocabulary), `adds`, `reads`,
`queue_actions`, `job_actions` and `worker`; this package names them all.
"""

from __future__ import annotations

from .adds import add_call, send_adds
from .job_actions import (
    add_log,
    change_priority,
    promote,
    reprocess,
    update_data,
    update_progress,
)
from .queue_actions import (
    clean,
    del_meta,
    drain,
    move_jobs_to_wait,
    move_jobs_to_wait_once,
    obliterate,
    pause,
    rate_limit,
    rate_limit_ttl,
    remove,
    remove_rate_limit_key,
    set_meta,
)
from .reads import (
    DEFAULT_STATES,
    JobRead,
    children_values,
    dependencies,
    get_counts,
    get_job_hashes,
    get_logs,
    get_state,
    grouped_waiting,
    job_fields,
    oldest_waiting,
    page_ids,
    state_keys,
)
from .requests import Atomic, Cmd, Eval, EveryPrimary, Op, Request, now_ms
from .worker import (
    claim,
    count_marked_to_fail,
    extend_locks,
    finish,
    move_stalled,
    move_to_wait,
    retry_later,
    retry_now,
)

__all__ = [
    "DEFAULT_STATES",
    "Atomic",
    "Cmd",
    "Eval",
    "EveryPrimary",
    "JobRead",
    "Op",
    "Request",
    "add_call",
    "add_log",
    "change_priority",
    "children_values",
    "claim",
    "clean",
    "count_marked_to_fail",
    "del_meta",
    "dependencies",
    "drain",
    "extend_locks",
    "finish",
    "get_counts",
    "get_job_hashes",
    "get_logs",
    "get_state",
    "grouped_waiting",
    "job_fields",
    "move_jobs_to_wait",
    "move_jobs_to_wait_once",
    "move_stalled",
    "move_to_wait",
    "now_ms",
    "obliterate",
    "oldest_waiting",
    "page_ids",
    "pause",
    "promote",
    "rate_limit",
    "rate_limit_ttl",
    "remove",
    "remove_rate_limit_key",
    "reprocess",
    "retry_later",
    "retry_now",
    "send_adds",
    "set_meta",
    "state_keys",
    "update_data",
    "update_progress",
]
