"""Every Redis key of a queue, in one place (docs/protocol.md §1)."""

from __future__ import annotations

from .names import qualified_name
from .state import JobState

SUFFIXES = (
    "wait",
    "active",
    "paused",
    "id",
    "delayed",
    "prioritized",
    "stalled-check",
    "completed",
    "failed",
    "stalled",
    "repeat",
    "limiter",
    "meta",
    "events",
    "pc",
    "marker",
    "waiting-children",
)

#: First segments of the queue's multi-part keys: `metrics:completed:data`,
#: `de:<dedup id>`, `dn:<dedup id>`, the groups' `groups:<part>` and
#: `group:<id>[:wait|:limiter]` (docs/groups.md). Scheduler hashes,
#: `repeat:<id>`, are the two-part `repeat` ids; three-part
#: `repeat:<id>:<millis>` are its jobs.
_KEY_FAMILIES = ("metrics", "de", "dn", "group", "groups")


def names_queue_key(job_id: str) -> bool:
    """Whether a job with this id would have one of the queue's own keys as its
    hash (`wait`, `meta`, `metrics:failed:data`, a scheduler's `repeat:<id>`...):
    such a job breaks the queue, and such an id is never a job to read."""
    head, colon, rest = job_id.partition(":")
    return (
        job_id in SUFFIXES
        or head in _KEY_FAMILIES
        or (head == "repeat" and bool(colon) and ":" not in rest)
    )


class QueueKeys:
    """Key names of one queue: `{prefix}:{name}:{suffix}` and per-job keys."""

    __slots__ = (
        "prefix",
        "name",
        "base",
        "wait",
        "active",
        "paused",
        "id",
        "delayed",
        "prioritized",
        "stalled_check",
        "completed",
        "failed",
        "stalled",
        "repeat",
        "limiter",
        "meta",
        "events",
        "pc",
        "marker",
        "waiting_children",
        "groups_meta",
        "groups_q",
        "groups_tail",
        "groups_index",
        "groups_delayed",
        "groups_timed",
        "groups_leases",
        "groups_paused",
        "groups_held",
        "groups_active",
        "groups_slotted",
        "groups_parked",
        "groups_own",
    )

    def __init__(self, name: str, prefix: str = "bull") -> None:
        self.prefix = prefix
        self.name = name
        base = self.base = f"{prefix}:{name}:"
        self.wait = base + "wait"
        self.active = base + "active"
        self.paused = base + "paused"
        self.id = base + "id"
        self.delayed = base + "delayed"
        self.prioritized = base + "prioritized"
        self.stalled_check = base + "stalled-check"
        self.completed = base + "completed"
        self.failed = base + "failed"
        self.stalled = base + "stalled"
        self.repeat = base + "repeat"
        self.limiter = base + "limiter"
        self.meta = base + "meta"
        self.events = base + "events"
        self.pc = base + "pc"
        self.marker = base + "marker"
        self.waiting_children = base + "waiting-children"
        # Groups (docs/groups.md): Bullpen's own keys, no BullMQ client reads them.
        self.groups_meta = base + "groups:meta"
        self.groups_q = base + "groups:q"
        self.groups_tail = base + "groups:tail"
        self.groups_index = base + "groups:index"
        self.groups_delayed = base + "groups:delayed"
        self.groups_timed = base + "groups:timed"
        self.groups_leases = base + "groups:leases"
        self.groups_paused = base + "groups:paused"
        self.groups_held = base + "groups:held"
        self.groups_active = base + "groups:active"
        self.groups_slotted = base + "groups:slotted"
        self.groups_parked = base + "groups:parked"
        self.groups_own = base + "groups:own"

    @property
    def qualified_name(self) -> str:
        """`{prefix}:{name}`, as BullMQ stores it in a child's `parent.queueKey`."""
        return qualified_name(self.prefix, self.name)

    def group(self, group: str) -> str:
        """A group's hash (`:wait` and `:limiter` are its other keys)."""
        return f"{self.base}group:{group}"

    def job(self, job_id: str) -> str:
        """The job hash."""
        return self.base + job_id

    def lock(self, job_id: str) -> str:
        """The job's lock string."""
        return f"{self.base}{job_id}:lock"

    def logs(self, job_id: str) -> str:
        """The job's log list."""
        return f"{self.base}{job_id}:logs"

    def dependencies(self, job_id: str) -> str:
        """A parent's set of pending child job keys."""
        return f"{self.base}{job_id}:dependencies"

    def processed(self, job_id: str) -> str:
        """A parent's hash of child job key to return value."""
        return f"{self.base}{job_id}:processed"

    def failed_children(self, job_id: str) -> str:
        """A parent's hash of child job key to failedReason (idof/cpof children)."""
        return f"{self.base}{job_id}:failed"

    def unsuccessful(self, job_id: str) -> str:
        """A parent's ZSET of failed fpof child job keys."""
        return f"{self.base}{job_id}:unsuccessful"

    def dedup(self, dedup_id: str) -> str:
        """The deduplication owner key."""
        return f"{self.base}de:{dedup_id}"

    def dedup_next(self, dedup_id: str) -> str:
        """The "next job" a keepLastIfActive window keeps while its owner runs."""
        return f"{self.base}dn:{dedup_id}"

    def scheduler(self, scheduler_id: str) -> str:
        """A job scheduler's definition hash."""
        return f"{self.repeat}:{scheduler_id}"

    def move_to_active_keys(self) -> tuple[str, ...]:
        """KEYS of move_to_active (and the first nine of move_to_finished)."""
        return (
            self.wait,
            self.active,
            self.prioritized,
            self.events,
            self.limiter,
            self.delayed,
            self.meta,
            self.pc,
            self.marker,
        )

    def move_to_finished_keys(self) -> tuple[str, ...]:
        """KEYS of move_to_finished."""
        return self.move_to_active_keys() + (
            self.stalled,
            self.completed,
            self.failed,
            self.metrics("completed"),
            self.metrics_data("completed"),
            self.metrics("failed"),
            self.metrics_data("failed"),
        )

    def metrics(self, target: str) -> str:
        """The metrics hash (count, prevTS, prevCount) of `completed` or `failed`."""
        return f"{self.base}metrics:{target}"

    def metrics_data(self, target: str) -> str:
        """The per-minute counts list of `completed` or `failed`, newest first."""
        return f"{self.base}metrics:{target}:data"

    def state(self, state: JobState) -> str:
        """The key that holds jobs in a state."""
        return self.base + state.key_suffix


def attempts_key(namespace: str, prefix: str, queue: str, job_id: str) -> str:
    """A job's attempt history (a list, newest first): under Bullpen's own
    namespace, never a queue's keys, so BullMQ clients and scripts ignore it."""
    return f"{namespace}:attempts:{prefix}:{queue}:{job_id}"
