"""A job as read from its hash (docs/protocol.md §2), with the actions that act on it.

A Job is bound to the queue that read it, its driver (`queues.driver`): with
a `Queue` its methods return values; with an `AsyncQueue` they return
awaitables. `Job[Queue]` and `Job[AsyncQueue]` say which to type checkers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import codec, ops
from .driver import Driver, op_method
from .options import decode_opts
from .state import JobState

if TYPE_CHECKING:  # a default (PEP 696) lets a plain `Job` mean `Job[Any]`
    import typing_extensions

    D = typing_extensions.TypeVar("D", bound=Driver, default=Any)
else:
    D = TypeVar("D")


class MalformedJob(ValueError):
    """Why a job hash written by another client cannot be run."""


@dataclass(eq=False, slots=True)
class Job(Generic[D]):
    """One job: its fields and the actions on it (retry, remove, progress...)."""

    queue: D = field(repr=False)
    id: str
    name: str = ""
    data: Any = None
    opts: dict[str, Any] = field(default_factory=dict)
    progress: Any = 0
    returnvalue: Any = None
    failed_reason: str | None = None
    stacktrace: list[str] = field(default_factory=list)
    attempts_made: int = 0
    attempts_started: int = 0
    stalled_counter: int = 0
    timestamp: int = 0
    delay: int = 0
    priority: int = 0
    processed_on: int | None = None
    finished_on: int | None = None
    processed_by: str | None = None
    parent_key: str | None = None
    parent: dict[str, Any] | None = None
    repeat_job_key: str | None = None
    deduplication_id: str | None = None
    deferred_failure: str | None = None
    #: Set when the hash cannot be run as written (bad JSON, missing fields).
    malformed: str | None = None
    #: Fields a capped read left out (`max_value_bytes`), with their byte
    #: lengths; such a field reads as unset (data: None).
    left_out: dict[str, int] = field(default_factory=dict, repr=False)
    #: The lock token of the worker running it (worker side only).
    token: str | None = field(default=None, repr=False)
    #: Called with (job, progress) once update_progress has written it
    #: (worker side only).
    on_progress: Callable[[Job, Any], None] | None = field(default=None, repr=False)
    raw: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_hash(
        cls,
        queue: D,
        job_id: str,
        h: dict[str, str],
        left_out: dict[str, int] | None = None,
    ) -> Job[D]:
        """Build a job from its hash; never raises on bad content, sets `malformed`.
        `left_out`: fields a capped read did not fetch (not a problem)."""
        problems: list[str] = []
        job = cls(queue, job_id, raw=h, left_out=left_out or {})
        name = h.get("name")
        if name is None:
            problems.append("the job hash has no 'name' field")
        job.name = name or ""
        raw_data = h.get("data")
        if raw_data is None:
            if "data" not in job.left_out:
                problems.append("the job hash has no 'data' field")
        else:
            try:
                job.data = codec.loads(raw_data)
            except codec.JSONDecodeError as exc:
                job.data = raw_data
                problems.append(f"job data is not valid JSON ({exc})")
        raw_opts = h.get("opts")
        if raw_opts:
            try:
                opts = codec.loads(raw_opts)
                if isinstance(opts, dict):
                    job.opts = decode_opts(opts)
                else:
                    problems.append("job opts is not a JSON object")
            except codec.JSONDecodeError as exc:
                problems.append(f"job opts is not valid JSON ({exc})")
        if "progress" in h:
            job.progress = codec.json_or_text(h["progress"])
        if "returnvalue" in h:
            job.returnvalue = codec.json_or_text(h["returnvalue"])
        job.failed_reason = h.get("failedReason")
        if h.get("stacktrace"):
            trace = codec.json_or_text(h["stacktrace"])
            job.stacktrace = trace if isinstance(trace, list) else [str(trace)]
        get = h.get
        job.attempts_made = _int(get("atm") or get("attemptsMade"))
        job.attempts_started = _int(get("ats"))
        job.stalled_counter = _int(get("stc"))
        job.timestamp = _int(get("timestamp"))
        job.delay = _int(get("delay"))
        job.priority = _int(get("priority"))
        processed_on = get("processedOn")
        job.processed_on = None if processed_on is None else _int(processed_on)
        finished_on = get("finishedOn")
        job.finished_on = None if finished_on is None else _int(finished_on)
        job.processed_by = h.get("pb")
        job.parent_key = h.get("parentKey")
        if h.get("parent"):
            parent = codec.json_or_text(h["parent"])
            job.parent = parent if isinstance(parent, dict) else None
        job.repeat_job_key = h.get("rjk")
        job.deduplication_id = h.get("deid")
        job.deferred_failure = h.get("defa")
        if problems:
            job.malformed = "malformed job: " + "; ".join(problems)
        return job

    # --- derived values -------------------------------------------------
    @property
    def attempts(self) -> int:
        """Allowed attempts (BullMQ: `opts.attempts`, 0 or missing means 1)."""
        value = self.opts.get("attempts") or 1
        return int(value) if isinstance(value, (int, float)) else 1

    @property
    def lifo(self) -> bool:
        """Whether the job runs before older jobs of its priority."""
        return bool(self.opts.get("lifo"))

    @property
    def group(self) -> str | None:
        """The job's group (docs/groups.md): the hash field `gid` once Bullpen
        placed it, else `opts.group.id` as a producer wrote it; None for an
        ungrouped job."""
        gid = self.raw.get("gid")
        if gid:
            return gid
        group = self.opts.get("group")
        if isinstance(group, dict) and isinstance(group.get("id"), str):
            return str(group["id"])
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view of the job's fields (for CLIs and APIs)."""
        return {
            "id": self.id,
            "name": self.name,
            "data": self.data,
            "opts": self.opts,
            "progress": self.progress,
            "returnvalue": self.returnvalue,
            "failedReason": self.failed_reason,
            "stacktrace": self.stacktrace,
            "attemptsMade": self.attempts_made,
            "attemptsStarted": self.attempts_started,
            "timestamp": self.timestamp,
            "delay": self.delay,
            "priority": self.priority,
            "processedOn": self.processed_on,
            "finishedOn": self.finished_on,
            "processedBy": self.processed_by,
        }

    def repair_fields(self) -> list[str]:
        """Hash field updates that let every client read a malformed job after
        it fails. Data that is not JSON is stored as a JSON string of its text
        (bytes that are not UTF-8 become U+FFFD): Node's Job.fromJSON parses
        data unguarded, so one such job would break getJobs for its whole
        state. Opts that are not a JSON object become `{}`, the text kept in
        `rawOpts`."""
        fields: list[str] = []
        raw_data = self.raw.get("data")
        if raw_data is not None and not _is_json(raw_data):
            fields += ["data", codec.dumps(_valid_text(raw_data))]
        raw_opts = self.raw.get("opts")
        if raw_opts and not (_is_json(raw_opts) and raw_opts.lstrip()[:1] == "{"):
            fields += ["opts", "{}", "rawOpts", _valid_text(raw_opts)]
        return fields

    # --- actions: sync or awaitable, as the bound queue is ---------------
    @property
    def driver(self) -> D:
        """What runs the job's actions: the queue that read it."""
        return self.queue

    @op_method
    def get_state(self) -> ops.Op[JobState]:
        """The job's current state (a JobState)."""
        return ops.get_state(self.queue.keys, self.id)

    @op_method
    def update_progress(self, progress: Any) -> ops.Op[int]:
        """Store progress (a number or a JSON object) and emit `progress`."""
        self.progress = progress
        stored = ops.update_progress(self.queue.keys, self.id, progress)
        listener = self.on_progress
        if listener is None:
            return stored
        return _then_tell(stored, listener, self, progress)

    @op_method
    def log(self, line: str) -> ops.Op[int]:
        """Append a line to the job's log; returns the log's length."""
        keep = self.opts.get("keepLogs")
        return ops.add_log(self.queue.keys, self.id, str(line), keep)

    @op_method
    def get_logs(
        self, start: int = 0, end: int = -1, asc: bool = True
    ) -> ops.Op[tuple[list[str], int]]:
        """The job's log lines and their total count."""
        return ops.get_logs(self.queue.keys, self.id, start, end, asc)

    @op_method
    def update_data(self, data: Any) -> ops.Op[int]:
        """Replace the job's data."""
        self.data = data
        return ops.update_data(self.queue.keys, self.id, data)

    @op_method
    def change_priority(self, priority: int = 0, lifo: bool = False) -> ops.Op[int]:
        """Change the priority; a waiting job is re-queued under it."""
        self.priority = priority
        keys = self.queue.keys
        return ops.change_priority(keys, self.id, priority, lifo)

    @op_method
    def promote(self) -> ops.Op[int]:
        """Move a delayed job to run now."""
        return ops.promote(self.queue.keys, self.id)

    @op_method
    def remove(self, remove_children: bool = True) -> ops.Op[bool]:
        """Delete the job and its children (refused while a worker holds the
        lock of the job or of a pending child)."""
        return ops.remove(self.queue.keys, self.id, remove_children)

    # --- flows ----------------------------------------------------------------
    @op_method
    def get_children_values(self) -> ops.Op[dict[str, Any]]:
        """{child job key: return value} of this parent's completed children."""
        return ops.children_values(self.queue.keys, self.id)

    @op_method
    def get_dependencies(self) -> ops.Op[dict[str, Any]]:
        """This parent's children by outcome: {processed: {key: value},
        unprocessed: [key], failed: [key], ignored: {key: failedReason}}."""
        return ops.dependencies(self.queue.keys, self.id)

    @op_method
    def retry(
        self,
        state: str = "failed",
        reset_attempts_made: bool = False,
        reset_attempts_started: bool = False,
    ) -> ops.Op[int]:
        """Move a failed (or completed) job back to wait."""
        return ops.reprocess(
            self.queue.keys,
            self.id,
            state,
            self.lifo,
            reset_attempts_made,
            reset_attempts_started,
        )


def _then_tell(
    stored: ops.Op[int],
    listener: Callable[[Job, Any], None],
    job: Job,
    progress: Any,
) -> ops.Op[int]:
    """`stored`, then the job's progress listener once it has run."""
    code = yield from stored
    listener(job, progress)
    return code


def _valid_text(value: str) -> str:
    """Text that can be sent back to Redis: bytes that were not UTF-8 (read
    with surrogateescape) become U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _is_json(value: str) -> bool:
    try:
        codec.loads(value)
    except codec.JSONDecodeError:
        return False
    return True


def _int(value: str | None) -> int:
    """An integer field (0 when absent); tolerates floats from other clients."""
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        return codec.to_int(value, 0) or 0
