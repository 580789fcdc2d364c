"""GPU-time quotas per group: a real GpuWorker on a simulated GPU counts each
grouped attempt's GPU-seconds in its group's UTC day and holds the group once
its budget is used; its remaining jobs wait (`quota_exhausted`), other groups
run on, and raising the budget releases it: every job runs exactly once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis

from gpu_workers.gputime import OTHER, Usage
from gpu_workers.keys import BullpenKeys
from gpu_workers.quota import (
    QUOTA_HOLD,
    QuotaError,
    QuotaKeeper,
    Quotas,
    day_stamp,
    next_midnight_ms,
)
from queues import AsyncQueue, Queue
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers test handlers
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.gpu_workers.waiting_helpers import reason_of
from tests.helpers import wait_until

KEYS = BullpenKeys()
#: What each job of the budgeted group sleeps: its GPU-seconds are at least this.
JOB_S = 0.3
BUDGET_S = 0.5


def _record(
    redis_url: str, q: Queue, usage: Usage, group: str, now_s: float, cap: int = 100
) -> float:
    """Count one attempt of `group` as a worker does; the group's use today."""

    async def go() -> float:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        queue = AsyncQueue(q.name, connection=redis_url, prefix=q.prefix)
        try:
            keeper = QuotaKeeper(client, KEYS, queue, max_groups=cap)
            return (await keeper.record(usage, group, now_s=now_s)).used_s
        finally:
            await queue.close()
            await client.aclose()

    return asyncio.run(go())


def _usage(q: Queue, start_s: float, end_s: float) -> Usage:
    return Usage(q.keys.qualified_name, "job", "-", start_s, end_s, 0, True)


@pytest.fixture
def worker(redis_url: str, qname: str) -> Iterator[WorkerThread]:
    """One GpuWorker on simulated GPU SIM-t-0 with 4 slots."""
    w = WorkerThread(make_spec(redis_url, qname, slots=4))
    yield w
    if w.alive:
        w.stop()


def _states(q: Queue, ids: list[str]) -> list[str]:
    return [q.get_job_state(i).value for i in ids]


def test_a_group_crossing_its_budget_waits_until_it_is_raised(
    q: Queue, r: redis.Redis, worker: WorkerThread
) -> None:
    """Group `small` (budget 0.5 GPU-s, one job at a time, 0.3 s jobs) is
    held once its second job at most ends; its other jobs wait with
    `quota_exhausted` while group `big` runs to the end; raising the budget
    releases it and every job completes exactly once."""
    quotas = Quotas(r)
    quotas.set_budget(q.name, "small", BUDGET_S)
    q.set_group("small", concurrency=1)
    small = [q.add("test.sleep", {"s": JOB_S}, group="small").id for _ in range(6)]
    big = [q.add("test.sleep", {"s": 0.02}, group="big").id for _ in range(6)]
    wait_until(
        lambda: (g := q.get_group("small")) is not None and g.hold == QUOTA_HOLD,
        timeout=30,
        what="group small held for its quota",
    )
    wait_until(lambda: set(_states(q, big)) == {"completed"}, timeout=30)
    wait_until(lambda: "active" not in _states(q, small), timeout=30)
    states = _states(q, small)
    done = states.count("completed")
    # Each job uses >= 0.3 GPU-s: the budget is used by the second at most.
    assert 1 <= done <= 2 and states.count("waiting") == 6 - done
    held = q.get_group("small")
    assert held is not None and held.hold_until_ms == next_midnight_ms(time.time())
    assert held.hold_info["budget_s"] == BUDGET_S
    assert held.hold_info["used_s"] >= BUDGET_S
    quota = quotas.get_quota(q.name, "small")
    assert quota.exhausted
    assert quota.used_s == pytest.approx(held.hold_info["used_s"], abs=0.001)
    waiting = small[states.index("waiting")]
    reason = reason_of(r, q, waiting)
    assert reason is not None and reason.code == "quota_exhausted"
    assert reason.numbers["budget_s"] == BUDGET_S
    time.sleep(3 * JOB_S)  # held: nothing more of it starts
    assert _states(q, small).count("completed") == done
    raised = quotas.set_budget(q.name, "small", 100)
    assert not raised.exhausted
    wait_until(lambda: set(_states(q, small)) == {"completed"}, timeout=30)
    for job_id in small + big:
        job = q.get_job(job_id)
        assert job is not None and job.attempts_made == 1
        assert job.attempts_started == 1
    assert quotas.usage_today(q.name, "small") >= 6 * JOB_S
    assert quotas.usage_today(q.name, "big") > 0
    assert (g := q.get_group("small")) is not None and g.hold is None


def test_setting_a_budget_holds_or_releases_at_once(
    q: Queue, r: redis.Redis, redis_url: str
) -> None:
    """10 GPU-s used today: a budget of 5 holds the group at once (till the
    next UTC midnight), 20 releases it, 5 then None (no budget) too; a hold
    for another reason is neither replaced nor released by a budget."""
    q.add("job", {}, group="acme")
    now = time.time()
    assert _record(redis_url, q, _usage(q, now - 10, now), "acme", now) == 10
    quotas = Quotas(r)
    held = quotas.set_budget(q.keys, "acme", 5)
    assert held.exhausted and held.used_s == pytest.approx(10)
    info = q.get_group("acme")
    assert info is not None and info.hold == QUOTA_HOLD
    assert info.hold_until_ms == next_midnight_ms(now)
    assert info.hold_info == {"used_s": 10.0, "budget_s": 5.0, "day": day_stamp(now)}
    quotas.set_budget(q.keys.qualified_name, "acme", 20)
    assert (g := q.get_group("acme")) is not None and g.hold is None
    quotas.set_budget(q.name, "acme", 5)
    assert (g := q.get_group("acme")) is not None and g.hold == QUOTA_HOLD
    quotas.set_budget(q.name, "acme", None)
    assert (g := q.get_group("acme")) is not None and g.hold is None
    assert quotas.get_budget(q.name, "acme") is None
    q.hold_group("acme", "billing")
    quotas.set_budget(q.name, "acme", 5)
    quotas.set_budget(q.name, "acme", 50)
    assert (g := q.get_group("acme")) is not None and g.hold == "billing"


def test_usage_splits_at_midnight_and_folds_past_the_cap(
    q: Queue, r: redis.Redis, redis_url: str
) -> None:
    """An attempt from 30 s before midnight to 10 s after counts 30 s in the
    old day and 10 s in the new; past the cap of groups, groups without a
    budget fold into (other), one with a budget still counts as itself; the
    budgets list shows each with its use."""
    midnight = (int(time.time()) // 86400) * 86400
    after = midnight + 10
    assert _record(redis_url, q, _usage(q, midnight - 30, after), "a", after) == 10
    quotas = Quotas(r)
    assert quotas.usage_today(q.name, "a", now_s=after) == pytest.approx(10)
    assert quotas.usage_today(q.name, "a", now_s=midnight - 1) == pytest.approx(30)
    day = KEYS.group_usage(q.keys.qualified_name, day_stamp(after))
    assert 8 * 86400 < r.ttl(day) <= 9 * 86400
    quotas.set_budget(q.name, "d", 1000, now_s=after)
    for group in ("b", "c", "d"):
        _record(redis_url, q, _usage(q, after - 2, after), group, after, cap=2)
    assert set(r.hgetall(day)) == {"a", "b", OTHER, "d"}
    assert float(r.hget(day, OTHER)) == pytest.approx(2)
    listed = quotas.list_budgets(q.name, now_s=after)
    assert [(x.group, x.budget_s, x.used_s) for x in listed] == [("d", 1000.0, 2.0)]


@pytest.mark.parametrize(
    ("group", "seconds", "says"),
    [
        ("a:b", 10, "group must be"),
        ("", 10, "group must be"),
        ("acme", -1, "between 0 and"),
        ("acme", float("nan"), "between 0 and"),
        ("acme", True, "number of GPU-seconds"),
        ("acme", "10", "number of GPU-seconds"),
    ],
)
def test_invalid_budgets_are_refused(
    r: redis.Redis, q: Queue, group: str, seconds: object, says: str
) -> None:
    """Bad group ids and budgets raise QuotaError saying what is wrong."""
    with pytest.raises(QuotaError, match=says):
        Quotas(r).set_budget(q.name, group, seconds)  # type: ignore[arg-type]
    with pytest.raises(QuotaError, match="queue"):
        Quotas(r).get_budget("", "acme")
