"""Errors raised by the queue core.

QueueError
 ├── JobNotFound
 ├── JobNotInState
 ├── JobLocked
 ├── LockMismatch
 ├── JobHasDependencies
 ├── SchedulerIterationError
 ├── SchedulerConflict
 ├── QueueNotPaused
 ├── QueueHasActiveJobs
 ├── InvalidJobOptions
 │    └── InvalidJobId
 ├── ScriptError
 ├── NotDurable
 └── RedisUnavailable   (also a redis ResponseError)
UnrecoverableError      (raised by processors; not a QueueError)
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

from redis.exceptions import ResponseError


class QueueError(Exception):
    """Base class of every error the queue core raises."""


class JobNotFound(QueueError):
    """Raised when a job id has no hash in Redis."""


class JobNotInState(QueueError):
    """Raised when a transition needs the job in a state it is not in."""


class JobLocked(QueueError):
    """Raised when a job (or a pending child) is locked and cannot be removed."""


class LockMismatch(QueueError):
    """Raised when a worker's lock on a job is missing or held by another token."""


class JobHasDependencies(QueueError):
    """Raised when a parent job is completed while children are pending or failed."""


class SchedulerIterationError(QueueError):
    """Raised when removing the current iteration of a job scheduler."""


class SchedulerConflict(QueueError):
    """Raised when a job scheduler's next iteration id is taken by another job."""


class QueueNotPaused(QueueError):
    """Raised when obliterating a queue that is not paused."""


class QueueHasActiveJobs(QueueError):
    """Raised when obliterating a queue with active jobs without force."""


class InvalidJobOptions(QueueError, ValueError):
    """Raised when job options are invalid (id, priority, delay, backoff, retention)."""


class InvalidJobId(InvalidJobOptions):
    """Raised when a custom job id is refused (integer-like, ':', a queue key)."""


class ScriptError(QueueError):
    """Raised when a Lua script returns an error code that has no finer class."""


class NotDurable(QueueError):
    """Raised when fewer replicas than a queue's `Durability` asks for confirmed
    an add in time: the job is on the primary, but a failover now may lose it."""

    def __init__(
        self, job_ids: Sequence[str], acked: int, wanted: int, timeout_ms: int
    ) -> None:
        self.job_ids = tuple(str(i) for i in job_ids)
        self.acked = acked
        self.wanted = wanted
        them = "it" if len(self.job_ids) == 1 else "them"
        super().__init__(
            f"{_jobs(self.job_ids)} added on the primary but not confirmed: "
            f"{acked} of {wanted} replicas acknowledged within {timeout_ms} ms, "
            f"so a failover now may lose {them}"
        )

    @property
    def job_id(self) -> str:
        """The id of the job (the first one of an `add_bulk`)."""
        return self.job_ids[0]


def _jobs(ids: tuple[str, ...], shown: int = 5) -> str:
    if len(ids) == 1:
        return f"job {ids[0]}"
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return f"jobs {', '.join(ids[:shown])}{more}"


class RedisUnavailable(QueueError, ResponseError):
    """Raised when Redis refuses a command for a while (out of memory,
    read-only replica, loading...): nothing was written; retry later."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, status_code=code)


class UnrecoverableError(Exception):
    """Raised by a processor to fail its job at once, without retries."""


class MoveToWait(Exception):  # noqa: N818 - an instruction, as UnrecoverableError
    """Raised by a processor to give its job back untouched: the worker moves
    it to the front of the line (of `wait`, of its priority, or of its group),
    its attempts not counted, and takes it or another job again later (BullMQ:
    `job.moveToWait(token)`, then `WaitingError`). The message says why; it
    is logged and kept as the attempt's error (outcome `returned`)."""


class RateLimitError(MoveToWait):
    """Raised by a processor whose job hit a rate limit outside Bullpen (an
    upstream API's 429): the job goes back to the front of the line,
    uncounted, as with MoveToWait, and the worker claims nothing until the
    queue's rate limit ends (BullMQ: `Worker.RateLimitError()` after
    `queue.rateLimit(ms)`). With `delay_ms` the worker sets that limit itself,
    in the same call that gives the job back; without it, the limit set
    before (`Queue.rate_limit`) applies, or none (the job is taken again)."""

    def __init__(self, message: str = "rate limited", *, delay_ms: int | None = None):
        if delay_ms is not None and (
            isinstance(delay_ms, bool) or not isinstance(delay_ms, int) or delay_ms < 1
        ):
            raise ValueError("RateLimitError delay_ms must be an integer >= 1")
        super().__init__(message)
        self.delay_ms = delay_ms


class Code(IntEnum):
    """Negative return codes shared by the Lua scripts."""

    JOB_NOT_FOUND = -1
    LOCK_MISSING = -2
    NOT_IN_STATE = -3
    PENDING_DEPENDENCIES = -4
    PARENT_MISSING = -5
    LOCK_MISMATCH = -6
    PARENT_MISMATCH = -7
    SCHEDULER_ITERATION = -8
    FAILED_CHILDREN = -9
    SCHEDULER_JOB_ID_COLLISION = -10
    SCHEDULER_SLOTS_BUSY = -11


_ERRORS: dict[int, tuple[type[QueueError], str]] = {
    Code.JOB_NOT_FOUND: (JobNotFound, "job {job_id} does not exist"),
    Code.LOCK_MISSING: (LockMismatch, "lock of job {job_id} is missing"),
    Code.NOT_IN_STATE: (JobNotInState, "job {job_id} is not in the {state} state"),
    Code.PENDING_DEPENDENCIES: (
        JobHasDependencies,
        "job {job_id} has pending dependencies",
    ),
    Code.PARENT_MISSING: (JobNotFound, "parent of job {job_id} does not exist"),
    Code.LOCK_MISMATCH: (LockMismatch, "job {job_id} is locked by another worker"),
    Code.PARENT_MISMATCH: (QueueError, "job {job_id} already has another parent"),
    Code.SCHEDULER_ITERATION: (
        SchedulerIterationError,
        "job {job_id} is the current iteration of a job scheduler",
    ),
    Code.FAILED_CHILDREN: (JobHasDependencies, "job {job_id} has failed children"),
    Code.SCHEDULER_JOB_ID_COLLISION: (
        SchedulerConflict,
        "job scheduler {job_id}: its next iteration id is taken by another job",
    ),
    Code.SCHEDULER_SLOTS_BUSY: (
        SchedulerConflict,
        "job scheduler {job_id}: every scanned slot for its next iteration is taken",
    ),
}


def raise_for_code(code: object, job_id: str = "", state: str = "") -> None:
    """Raise the exception that a negative script return code stands for."""
    if not isinstance(code, int) or code >= 0:
        return
    cls, message = _ERRORS.get(
        code, (ScriptError, "script error {code} on job {job_id}")
    )
    raise cls(message.format(job_id=job_id, state=state or "expected", code=code))


def code_message(code: int, job_id: str = "", state: str = "") -> str:
    """What a negative script return code says, in words (as raise_for_code)."""
    _, message = _ERRORS.get(code, (ScriptError, "script error {code} on job {job_id}"))
    return message.format(job_id=job_id, state=state or "expected", code=code)
