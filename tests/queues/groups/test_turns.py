"""Groups (docs/groups.md): turns between groups, weights, priorities inside
a group, the ungrouped jobs' turn, and the wire (no grouped job in `wait`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from queues import Job, Queue, ops
from queues.exceptions import InvalidJobOptions
from tests.queues.groups.helpers import completed, running


def run_all(redis_url: str, qname: str, expect: int, concurrency: int = 1) -> list[str]:
    """Run a worker until `expect` jobs completed; the job ids in start order."""
    order: list[str] = []

    async def process(job: Job) -> Any:
        order.append(job.id)

    async def main() -> None:
        async with running(redis_url, qname, process, concurrency) as aq:
            await completed(aq, expect, 30)

    asyncio.run(main())
    return order


def test_a_burst_does_not_put_other_groups_behind_it(
    q: Queue, r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Group a adds 30 jobs, then b and c add 3 each: the worker (one job at
    a time) alternates a, b, c while all three have work, so b and c finish
    within the first 9 starts, not after a's 30; no grouped job is ever in
    `wait` or `prioritized`."""
    groups: dict[str, str] = {}
    for i in range(30):
        groups[q.add("j", {"i": i}, group="a").id] = "a"
    for g in ("b", "c"):
        for i in range(3):
            groups[q.add("j", {"i": i}, group=g).id] = g
    assert r.llen(q.keys.wait) == 0 and r.zcard(q.keys.prioritized) == 0
    assert q.get_counts("waiting") == {"waiting": 36}
    order = run_all(redis_url, qname, 36)
    seq = [groups[i] for i in order]
    assert seq[:9] == ["a", "b", "c"] * 3
    assert seq[9:] == ["a"] * 27
    assert len(set(order)) == 36


def test_weights_give_turns_in_a_row(q: Queue, redis_url: str, qname: str) -> None:
    """Weight 3 for a, 1 for b: a takes three turns for b's one."""
    q.set_group("a", weight=3)
    groups = {}
    for g in ("a", "b"):
        for _i in range(12):
            groups[q.add("j", {}, group=g).id] = g
    seq = [groups[i] for i in run_all(redis_url, qname, 24)]
    assert seq[:16] == ["a", "a", "a", "b"] * 4


def test_a_weight_set_on_a_backlog_applies_to_it(
    q: Queue, redis_url: str, qname: str
) -> None:
    """Weight 3 given to a once a and b have 12 jobs waiting each: the jobs
    already waiting take the new turns (a three for b's one, from the turn
    after the one served), not only the ones added after."""
    groups = {}
    for g in ("a", "b"):
        for _i in range(12):
            groups[q.add("j", {}, group=g).id] = g
    q.set_group("a", weight=3)
    seq = [groups[i] for i in run_all(redis_url, qname, 24)]
    # No turn served yet: b's tickets keep turns 1-12, a's waiting jobs take
    # turns again from 1 on, three a turn (a before b in each: id order).
    assert seq == ["a", "a", "a", "b"] * 4 + ["b"] * 8, seq


def test_priorities_order_jobs_inside_a_group_and_lifo(
    q: Queue, redis_url: str, qname: str
) -> None:
    """Inside one group: no priority first (FIFO; lifo newest first), then
    priority 1, then 5; each priority FIFO."""
    p5 = q.add("j", {}, group="a", priority=5).id
    p1a = q.add("j", {}, group="a", priority=1).id
    plain = q.add("j", {}, group="a").id
    p1b = q.add("j", {}, group="a", priority=1).id
    newest = q.add("j", {}, group="a", lifo=True).id
    assert run_all(redis_url, qname, 5) == [newest, plain, p1a, p1b, p5]


def test_ungrouped_jobs_take_one_turn_like_a_group(
    q: Queue, redis_url: str, qname: str
) -> None:
    """Ungrouped jobs (in `wait`, BullMQ's layout) and two groups: the
    ungrouped ones take every third turn while all have work."""
    kind = {}
    for _i in range(6):
        kind[q.add("j", {}).id] = "-"
    for g in ("a", "b"):
        for _i in range(6):
            kind[q.add("j", {}, group=g).id] = g
    seq = [kind[i] for i in run_all(redis_url, qname, 18)]
    assert sorted(seq[:3]) == ["-", "a", "b"]
    for k in range(0, 18, 3):
        assert sorted(seq[k : k + 3]) == ["-", "a", "b"], seq


def test_group_ids_are_checked(q: Queue) -> None:
    """A group id with `:` or too long, or not a string, is refused."""
    for bad in ("a:b", "", "x" * 101, 5, "sp ace"):
        with pytest.raises(InvalidJobOptions):
            q.add("j", {}, group=bad)
    job = q.add("j", {}, group={"id": "acme/sub-1"})
    assert job.opts["group"] == {"id": "acme/sub-1"}
    got = q.get_job(job.id)
    assert got is not None and got.group == "acme/sub-1"


def test_grouped_jobs_ready_in_one_ms_list_in_the_order_they_came(
    redis_url: str, qname: str
) -> None:
    """The waiting list (get_jobs) shows grouped jobs that became ready in
    the same ms in the order they were added, either way round, not in the
    text order of their ids (job 10 before job 2)."""
    q = Queue(qname, redis_url)
    same_ms = {"timestamp": 1_700_000_000_000}
    jobs = q.add_bulk(
        [
            {"name": "j", "data": {}, "opts": {"group": f"g{i % 2}", **same_ms}}
            for i in range(12)
        ]
    )
    added = [j.id for j in jobs]
    assert [j.id for j in q.get_jobs("waiting", 0, -1, asc=True)] == added
    assert [j.id for j in q.get_jobs("waiting", 0, -1)] == added[::-1]
    assert [j.id for j in q.get_jobs("waiting", 0, 4)] == added[::-1][:5]
    # The oldest waiting job's time is still that ms.
    assert q.drive(ops.oldest_waiting(q.keys)) == same_ms["timestamp"]
