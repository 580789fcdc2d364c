"""Job states as BullMQ names them."""

from __future__ import annotations

from enum import Enum


class JobState(str, Enum):
    """Where a job is; values are BullMQ's state names."""

    WAITING = "waiting"
    PRIORITIZED = "prioritized"
    DELAYED = "delayed"
    ACTIVE = "active"
    WAITING_CHILDREN = "waiting-children"
    COMPLETED = "completed"
    FAILED = "failed"
    PAUSED = "paused"
    UNKNOWN = "unknown"

    @property
    def key_suffix(self) -> str:
        """The queue key that holds jobs in this state."""
        return "wait" if self is JobState.WAITING else self.value


TERMINAL = frozenset({JobState.COMPLETED, JobState.FAILED})
PENDING = frozenset(
    {
        JobState.WAITING,
        JobState.PRIORITIZED,
        JobState.DELAYED,
        JobState.WAITING_CHILDREN,
        JobState.PAUSED,
    }
)
LIST_STATES = frozenset({JobState.WAITING, JobState.ACTIVE, JobState.PAUSED})


def parse_state(value: str | JobState) -> JobState:
    """Accept `wait` as well as BullMQ's `waiting`; raise ValueError on others."""
    if isinstance(value, JobState):
        return value
    if value == "wait":
        return JobState.WAITING
    try:
        return JobState(value)
    except ValueError:
        names = ", ".join(s.value for s in JobState if s is not JobState.UNKNOWN)
        raise ValueError(
            f"unknown job state {value!r}; expected one of {names}"
        ) from None
