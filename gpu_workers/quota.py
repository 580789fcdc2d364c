"""GPU-time quotas: a budget of GPU-seconds per UTC day per (queue, group).

A group's GPU-seconds today come from the same attempts gputime.py counts
(a GPU worker records each when it ends, job_record.py), added to a daily
hash per queue (`group_usage` in keys.py: group -> GPU-seconds, at most
`USAGE_MAX_GROUPS` groups, the rest in `(other)` unless they have a budget;
kept `USAGE_DAYS_KEPT` days). The gputime buckets the pages read do not grow.

When an attempt of group g ends and g's usage today reaches its budget, the
worker holds the group (`hold_group(g, "quota", until_ms=<next UTC
midnight>, info={used_s, budget_s, day})`): its waiting jobs wait with the
reason `quota_exhausted`, its active jobs run to their end, nothing is lost.
The day turning ends the hold by itself; raising or removing the budget
releases it at once when usage is under the new budget (`Quotas`).

    quotas = Quotas(redis_client)
    quotas.set_budget("render", "acme", 3600)     # an hour of GPU a day
    quotas.get_quota("render", "acme").used_s

Both sides check again after they write, so a budget raised while a worker
holds the group never leaves a hold behind.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from queues import AsyncQueue, Queue
from queues.keys import QueueKeys
from queues.names import (
    GROUP_ID_RULE,
    is_group_id,
    qualified_name,
    split_qualified_name,
)

from . import defaults
from .gputime import DAY, OTHER, PERIOD_S, Usage, bucket_stamp, split
from .keys import BullpenKeys
from .scripts import LUA  # group_usage_add adds an attempt and reads the budget

#: The hold reason a quota sets (docs/groups.md: `hold_group(g, "quota")`).
QUOTA_HOLD = "quota"
#: Groups a queue's daily usage hash holds before the rest fold into (other).
USAGE_MAX_GROUPS = 10_000
#: Days a daily usage hash is kept after its day ends.
USAGE_DAYS_KEPT = 8
#: The largest budget accepted: 1,000 GPUs for a whole day.
BUDGET_MAX_S = 1000.0 * 86400


class QuotaError(ValueError):
    """Raised when a budget, a group id or a queue given to Quotas is invalid."""


def day_stamp(now_s: float) -> str:
    """The UTC day of `now_s` as YYYYMMDD."""
    return bucket_stamp(DAY, int(now_s // PERIOD_S[DAY]) * PERIOD_S[DAY])


def next_midnight_ms(now_s: float) -> int:
    """The next UTC midnight after `now_s`, in ms (when a quota hold ends)."""
    return (int(now_s // PERIOD_S[DAY]) + 1) * PERIOD_S[DAY] * 1000


def check_group(group: Any) -> str:
    """A valid group id, or QuotaError."""
    if not is_group_id(group):
        raise QuotaError(f"group must be {GROUP_ID_RULE}, not {group!r}")
    return str(group)


def check_budget(seconds: Any) -> float | None:
    """A budget in GPU-seconds (None: no budget), or QuotaError."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise QuotaError(
            f"budget must be a number of GPU-seconds or None, not {seconds!r}"
        )
    value = float(seconds)
    if not math.isfinite(value) or value < 0 or value > BUDGET_MAX_S:
        raise QuotaError(
            f"budget must be between 0 and {BUDGET_MAX_S:.0f} GPU-seconds, "
            f"not {seconds!r}"
        )
    return value


def queue_keys(
    queue: QueueKeys | str, prefix: str = defaults.QUEUE_PREFIX
) -> QueueKeys:
    """A queue's keys from its keys, its name (under `prefix`) or its
    qualified name `prefix:name` (names hold no colon)."""
    if isinstance(queue, QueueKeys):
        return queue
    if not isinstance(queue, str) or not queue:
        raise QuotaError(f"queue must be a queue name or QueueKeys, not {queue!r}")
    try:
        if ":" in queue:
            return QueueKeys(*reversed(split_qualified_name(queue)))
        return QueueKeys(queue, prefix)
    except ValueError as exc:
        raise QuotaError(f"not a queue name: {queue!r} ({exc})") from None


def group_of(job: Any) -> str | None:
    """The valid group a job belongs to (queues.Job.group: its `gid` field
    once Bullpen placed it, else `opts.group.id`); None for none."""
    gid = getattr(job, "group", None)
    return gid if is_group_id(gid) else None


@dataclass(frozen=True)
class Quota:
    """A group's budget and its use today (UTC)."""

    queue: str
    group: str
    budget_s: float | None
    used_s: float
    day: str
    #: When today ends (ms): when a quota hold ends by itself.
    until_ms: int

    @property
    def exhausted(self) -> bool:
        """Whether the group has used its whole budget today."""
        return self.budget_s is not None and self.used_s >= self.budget_s

    def info(self) -> dict[str, Any]:
        """What a quota hold carries (`hold_group(..., info=)`)."""
        return {
            "used_s": round(self.used_s, 3),
            "budget_s": self.budget_s,
            "day": self.day,
        }

    def as_dict(self) -> dict[str, Any]:
        """The quota as JSON-ready numbers."""
        return {
            "queue": self.queue,
            "group": self.group,
            "budget_s": self.budget_s,
            "used_s": round(self.used_s, 3),
            "day": self.day,
            "until_ms": self.until_ms,
            "exhausted": self.exhausted,
        }


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _hold_of(info: Any) -> str | None:
    """The hold reason of a `get_group` answer (None: not held, or gone)."""
    hold = getattr(info, "hold", None) if info is not None else None
    return hold if isinstance(hold, str) and hold else None


class Quotas:
    """The admins' side: set, read and list the budgets of one Redis (sync).

    `queue` is a queue's name (under `prefix`), its `prefix:name`, or its
    QueueKeys; `group` a group id; budgets are GPU-seconds per UTC day."""

    def __init__(self, client: Any, namespace: str = defaults.NAMESPACE) -> None:
        self.client = client
        self.keys = BullpenKeys(namespace)

    def set_budget(
        self,
        queue: QueueKeys | str,
        group: str,
        seconds: float | None,
        *,
        prefix: str = defaults.QUEUE_PREFIX,
        now_s: float | None = None,
    ) -> Quota:
        """Set (None: remove) a group's budget. A group already past the new
        budget today is held at once; a group held for its quota and now
        under it (or without a budget) is released at once."""
        keys = queue_keys(queue, prefix)
        check_group(group)
        budget = check_budget(seconds)
        budgets = self.keys.group_budgets(keys.qualified_name)
        if budget is None:
            self.client.hdel(budgets, group)
        else:
            self.client.hset(budgets, group, repr(budget))
        quota = self.get_quota(keys, group, now_s=now_s)
        self.enforce(keys, quota)
        return quota

    def enforce(self, keys: QueueKeys, quota: Quota) -> None:
        """Hold the group if it is past its budget, else release a quota hold."""
        queue = Queue(keys.name, connection=self.client, prefix=keys.prefix)
        try:
            if not quota.exhausted:
                queue.release_group(quota.group, QUOTA_HOLD)  # only a quota hold
            elif _hold_of(queue.get_group(quota.group)) in (None, QUOTA_HOLD):
                queue.hold_group(
                    quota.group, QUOTA_HOLD, until_ms=quota.until_ms, info=quota.info()
                )
        finally:
            if queue.client is not self.client:  # a sibling client of its own
                queue.close()

    def get_budget(
        self, queue: QueueKeys | str, group: str, *, prefix: str = defaults.QUEUE_PREFIX
    ) -> float | None:
        """A group's budget in GPU-seconds a day (None: none)."""
        keys = queue_keys(queue, prefix)
        raw = self.client.hget(
            self.keys.group_budgets(keys.qualified_name), check_group(group)
        )
        return _number(raw)

    def usage_today(
        self,
        queue: QueueKeys | str,
        group: str,
        *,
        prefix: str = defaults.QUEUE_PREFIX,
        now_s: float | None = None,
    ) -> float:
        """The GPU-seconds a group's jobs used today (UTC), attempts that
        ended so far."""
        return self.get_quota(queue, group, prefix=prefix, now_s=now_s).used_s

    def get_quota(
        self,
        queue: QueueKeys | str,
        group: str,
        *,
        prefix: str = defaults.QUEUE_PREFIX,
        now_s: float | None = None,
    ) -> Quota:
        """A group's budget and use today (one round trip)."""
        keys = queue_keys(queue, prefix)
        check_group(group)
        now = time.time() if now_s is None else now_s
        name = keys.qualified_name
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(self.keys.group_budgets(name), group)
        pipe.hget(self.keys.group_usage(name, day_stamp(now)), group)
        budget, used = pipe.execute()
        return Quota(
            name,
            group,
            _number(budget),
            _number(used) or 0.0,
            day_stamp(now),
            next_midnight_ms(now),
        )

    def get_quotas(
        self,
        queue: QueueKeys | str,
        groups: list[str],
        *,
        prefix: str = defaults.QUEUE_PREFIX,
        now_s: float | None = None,
    ) -> dict[str, Quota]:
        """The quotas of the groups named (a page of them), by group id: two
        HMGETs in one round trip, bounded by the groups asked for."""
        keys = queue_keys(queue, prefix)
        wanted = [check_group(group) for group in dict.fromkeys(groups)]
        if not wanted:
            return {}
        now = time.time() if now_s is None else now_s
        name = keys.qualified_name
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self.keys.group_budgets(name), wanted)
        pipe.hmget(self.keys.group_usage(name, day_stamp(now)), wanted)
        budgets, used = pipe.execute()
        return {
            group: Quota(
                name,
                group,
                _number(budget),
                _number(spent) or 0.0,
                day_stamp(now),
                next_midnight_ms(now),
            )
            for group, budget, spent in zip(wanted, budgets, used)
        }

    def list_budgets(
        self,
        queue: QueueKeys | str,
        *,
        prefix: str = defaults.QUEUE_PREFIX,
        now_s: float | None = None,
    ) -> list[Quota]:
        """Every group of the queue with a budget, with its use today, by
        group id (two commands, one round trip)."""
        keys = queue_keys(queue, prefix)
        now = time.time() if now_s is None else now_s
        name = keys.qualified_name
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.group_budgets(name))
        pipe.hgetall(self.keys.group_usage(name, day_stamp(now)))
        budgets, used = pipe.execute()
        out = []
        for raw_group, raw_budget in budgets.items():
            group = _text(raw_group)
            spent = used.get(raw_group, used.get(group))
            out.append(
                Quota(
                    name,
                    group,
                    _number(raw_budget),
                    _number(spent) or 0.0,
                    day_stamp(now),
                    next_midnight_ms(now),
                )
            )
        return sorted(out, key=lambda quota: quota.group)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class QuotaKeeper:
    """The worker's side: adds each grouped attempt's GPU-seconds to its
    group's day and holds the group once its budget is used (asyncio)."""

    def __init__(
        self,
        client: Any,
        bkeys: BullpenKeys,
        queue: AsyncQueue,
        max_groups: int = USAGE_MAX_GROUPS,
    ) -> None:
        self.bkeys = bkeys
        self.max_groups = max_groups
        self.queue = queue
        self.qualified = qualified_name(queue.prefix, queue.name)
        self._add = LUA.script(client, "group_usage_add")
        self._client = client

    async def record(
        self, usage: Usage, group: str, now_s: float | None = None
    ) -> Quota:
        """Count one attempt of `group`; hold the group when that used its
        budget up (the quota, after the attempt)."""
        now = time.time() if now_s is None else now_s
        keys = [
            self.bkeys.group_budgets(self.qualified),
            self.bkeys.group_usage(self.qualified, day_stamp(now)),
        ]
        args: list[Any] = [group, self.max_groups, OTHER]
        kept = USAGE_DAYS_KEPT * PERIOD_S[DAY]
        for start, seconds in split(DAY, usage.started_s, usage.ended_s):
            keys.append(
                self.bkeys.group_usage(self.qualified, bucket_stamp(DAY, start))
            )
            args.extend([f"{seconds:.6f}", start + PERIOD_S[DAY] + kept])
        used, budget = await self._add(keys=keys, args=args)
        quota = Quota(
            self.qualified,
            group,
            _number(budget),
            _number(used) or 0.0,
            day_stamp(now),
            next_midnight_ms(now),
        )
        if quota.exhausted:
            # Another hold (an admin's) is left as it is: it says more.
            if _hold_of(await self.queue.get_group(group)) in (None, QUOTA_HOLD):
                await self.queue.hold_group(
                    group, QUOTA_HOLD, until_ms=quota.until_ms, info=quota.info()
                )
                await self._recheck(quota)
        return quota

    async def _recheck(self, held: Quota) -> None:
        """An admin may have raised the budget between the script's read and
        the hold (their release then found no hold): read it again."""
        raw = await self._client.hget(
            self.bkeys.group_budgets(self.qualified), held.group
        )
        budget = _number(raw)
        if budget is None or held.used_s < budget:
            await self.queue.release_group(held.group, QUOTA_HOLD)
