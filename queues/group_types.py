"""Groups' settings and what reads of them return (docs/groups.md): the
group id check, the settings' bounds and validation, GroupSettings,
GroupInfo and GroupSummary; queues/groups.py holds the operations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import codec
from .exceptions import InvalidJobOptions
from .names import GROUP_ID_RULE, is_group_id

#: The largest weight (turns in a row) a group may have.
MAX_WEIGHT = 1000
#: The longest rate window, one day.
MAX_RATE_DURATION_MS = 86_400_000
#: Settings and the hash fields (and Lua argument names) they are stored as.
SETTING_FIELDS = {
    "weight": "weight",
    "concurrency": "concurrency",
    "rate_max": "max",
    "rate_duration_ms": "duration",
}
#: `set_group(..., x=UNSET)` leaves x as it is; None clears it.
UNSET: Any = object()


def validate_group_id(group: Any) -> str:
    """`group` when it is a valid group id; InvalidJobOptions otherwise."""
    if not is_group_id(group):
        raise InvalidJobOptions(f"group must be {GROUP_ID_RULE}")
    return str(group)


def _check_setting(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidJobOptions(f"group {name} must be an integer or None")
    low, high = {
        "weight": (1, MAX_WEIGHT),
        "concurrency": (0, 1_000_000),
        "rate_max": (1, 1_000_000_000),
        "rate_duration_ms": (1, MAX_RATE_DURATION_MS),
    }[name]
    if not low <= value <= high:
        raise InvalidJobOptions(f"group {name} must be between {low} and {high}")
    return value


def settings_args(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Validated settings (UNSET left out) as group_admin.lua's arguments."""
    unknown = set(settings) - set(SETTING_FIELDS)
    if unknown:
        raise InvalidJobOptions(f"unknown group settings: {', '.join(sorted(unknown))}")
    return {
        SETTING_FIELDS[k]: _check_setting(k, v)
        for k, v in settings.items()
        if v is not UNSET
    }


def _limit(value: Any) -> int | None:
    n = codec.to_int(value)
    return n if n is not None and n > 0 else None


@dataclass(frozen=True)
class GroupSettings:
    """Settings as stored (None: not set)."""

    weight: int | None = None
    concurrency: int | None = None
    rate_max: int | None = None
    rate_duration_ms: int | None = None

    @classmethod
    def from_hash(cls, h: Mapping[str, str]) -> GroupSettings:
        return cls(**{k: codec.to_int(h.get(f)) for k, f in SETTING_FIELDS.items()})


@dataclass(frozen=True)
class GroupInfo:
    """One group as read: counts, effective settings (its own over the
    defaults; `own` holds only its own), and why it may not run."""

    id: str
    waiting: int
    active: int
    weight: int
    concurrency: int | None
    rate_max: int | None
    rate_duration_ms: int | None
    paused: bool
    hold: str | None
    hold_until_ms: int | None
    hold_info: dict[str, Any]
    limited_until_ms: int | None
    in_rotation: bool
    own: GroupSettings = field(default_factory=GroupSettings)

    @property
    def at_concurrency(self) -> bool:
        """Whether as many of its jobs run as its concurrency allows."""
        return self.concurrency is not None and self.active >= self.concurrency

    def state(self, now_ms: int) -> str:
        """What the group does, in one word (the pages' and the CLI's):
        `paused`; `held`; `rate-limited` (its window is full); jobs wait and
        `at-concurrency` (as many run as it allows) or `ready` (they take
        turns); nothing waits and `running` (its jobs run) or `idle`."""
        if self.paused:
            return "paused"
        if self.hold:
            return "held"
        if self.limited_until_ms is not None and self.limited_until_ms > now_ms:
            return "rate-limited"
        if self.waiting:
            return "at-concurrency" if self.at_concurrency else "ready"
        return "running" if self.active else "idle"


@dataclass(frozen=True)
class GroupSearch:
    """The groups whose id holds a text (Queue.find_groups): the first
    `groups` by backlog, how many `matched`, and whether the search went
    through the whole index (`complete`; else `matched` is a lower bound)."""

    groups: list[GroupInfo]
    matched: int
    complete: bool


@dataclass(frozen=True)
class GroupSummary:
    """A queue's groups in totals."""

    groups: int
    waiting: int
    active: int
    paused: int
    held: int


def group_active_count(stored: str | None) -> int:
    """A group's running jobs from its `groups:active` value (kept only for
    groups under a limit)."""
    return max(0, codec.to_int(stored) or 0)
