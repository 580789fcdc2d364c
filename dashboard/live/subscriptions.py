"""A socket's `subscribe` message, parsed and checked.

    {"type": "subscribe", "queues": ["bull:render"], "jobs": ["bull:render:42"],
     "gpus": true, "last_ids": {"bull:render": "1700000000000-0"}}

Queue keys are `{prefix}:{name}` with a prefix the dashboard is configured for
(so a socket can never make the reader follow arbitrary keys); job keys are
`{prefix}:{name}:{id}`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dashboard.shared.conf import DEFAULTS
from queues.events import StreamId
from queues.keys import QueueKeys
from queues.names import check_queue_name

from . import defaults

_JOB_ID_MAX_CHARS = 200


class SubscriptionError(ValueError):
    """Raised when a subscribe message cannot be followed at all."""


class FollowRefused(SubscriptionError):
    """Raised when this process already follows as many queues as it may."""


@dataclass
class Subscription:
    """What one socket follows."""

    queues: set[str] = field(default_factory=set)
    #: (queue key, job id) pairs followed without their whole queue.
    jobs: set[tuple[str, str]] = field(default_factory=set)
    gpus: bool = False
    last_ids: dict[str, str] = field(default_factory=dict)
    #: Entries that were ignored, with the reason (sent back as an error).
    rejected: list[str] = field(default_factory=list)

    @property
    def streams(self) -> set[str]:
        """Every queue whose events stream this socket needs."""
        return self.queues | {q for q, _ in self.jobs}

    def drop(self, queue: str, reason: str) -> None:
        """Follow nothing of `queue` after all, and say why."""
        self.queues.discard(queue)
        self.jobs = {(q, j) for q, j in self.jobs if q != queue}
        self.last_ids.pop(queue, None)
        self.rejected.append(reason)

    def wants(self, queue: str, job: str | None) -> bool:
        """Whether a message about this queue (and job) goes to this socket."""
        return queue in self.queues or (job is not None and (queue, job) in self.jobs)


def split_queue_key(key: Any, prefixes: Iterable[str]) -> tuple[str, str]:
    """(prefix, name) of `prefix:name`; ValueError unless the prefix is allowed."""
    if not isinstance(key, str) or ":" not in key or len(key) > 300:
        raise ValueError(f"not a queue key `prefix:name`: {key!r}")
    prefix, name = key.rsplit(":", 1)
    if prefix not in set(prefixes):
        raise ValueError(f"prefix {prefix!r} is not one the dashboard follows")
    check_queue_name(name)
    return prefix, name


def keys_of(queue_key: str, prefixes: Iterable[str]) -> QueueKeys:
    """The Redis keys of a queue named by its key (`prefix:name`, the prefix
    one the dashboard follows, else ValueError)."""
    prefix, name = split_queue_key(queue_key, prefixes)
    return QueueKeys(name, prefix)


def too_many_queues(count: int, most: int) -> SubscriptionError:
    """The refusal of a subscribe that would follow more queues than a socket may."""
    return SubscriptionError(
        f"this page asks to follow {count} queues, but a live socket may follow "
        f"at most {most} (BULLPEN_LIVE_MAX_QUEUES_PER_SOCKET): subscribe refused"
    )


def parse(
    content: dict[str, Any],
    prefixes: Iterable[str],
    max_queues: int = DEFAULTS.live_max_queues_per_socket,
) -> Subscription:
    """The subscription a message asks for; bad entries are dropped and listed.
    More than `max_queues` queues (its own and those of its jobs) is refused."""
    prefixes = list(prefixes)
    sub = Subscription()
    queues = content.get("queues") or []
    jobs = content.get("jobs") or []
    if not isinstance(queues, list) or not isinstance(jobs, list):
        raise SubscriptionError("`queues` and `jobs` must be lists")
    if len(queues) > max_queues:
        raise too_many_queues(len(queues), max_queues)
    if len(jobs) > defaults.MAX_JOBS_PER_SOCKET:
        raise SubscriptionError(
            f"at most {defaults.MAX_JOBS_PER_SOCKET} jobs per socket"
        )
    for key in queues:
        try:
            split_queue_key(key, prefixes)
        except ValueError as exc:
            sub.rejected.append(str(exc))
            continue
        sub.queues.add(key)
    for key in jobs:
        if not isinstance(key, str) or key.count(":") < 2:
            sub.rejected.append(f"not a job key `prefix:name:id`: {key!r}")
            continue
        queue, job_id = key.rsplit(":", 1)
        try:
            split_queue_key(queue, prefixes)
        except ValueError as exc:
            sub.rejected.append(str(exc))
            continue
        if not job_id or len(job_id) > _JOB_ID_MAX_CHARS:
            sub.rejected.append(f"bad job id in {key!r}")
            continue
        sub.jobs.add((queue, job_id))
    if len(sub.streams) > max_queues:
        raise too_many_queues(len(sub.streams), max_queues)
    sub.gpus = content.get("gpus") is True
    last_ids = content.get("last_ids") or {}
    if isinstance(last_ids, dict):
        streams = sub.streams
        for queue, stream_id in last_ids.items():
            if queue in streams and StreamId.valid(stream_id):
                sub.last_ids[queue] = stream_id
    return sub
