"""A claim of several jobs takes the same turns as that many claims of one
(docs/groups.md, *What turns cost*): the tickets are popped together, and
what the call does not take goes back where it was."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from queues import Queue
from tests.queues.transitions.helpers import claimed, move_to_active, new_queue

Setup = Callable[[Queue], None]


def lone_group(q: Queue) -> None:
    """One group, priorities and lifo mixed."""
    for i in range(12):
        opts = {"priority": i % 3} if i % 4 else {"lifo": True}
        q.add("j", {"i": i}, group="g", **opts)


def weighted(q: Queue) -> None:
    """a (weight 3) and b (weight 1), 8 jobs each."""
    q.set_group("a", weight=3)
    for g in ("a", "b"):
        for _ in range(8):
            q.add("j", {}, group=g)


def capped(q: Queue) -> None:
    """A lone group at concurrency 4, 10 jobs."""
    q.set_group("g", concurrency=4)
    for _ in range(10):
        q.add("j", {}, group="g")


def ungrouped_first(q: Queue) -> None:
    """The ungrouped job's turn comes first, then g's 5 jobs (x's job,
    claimed here, serves a turn; the ungrouped jobs and g both join the turn
    after it, the ungrouped first)."""
    q.add("j", {}, group="x")
    assert claimed(move_to_active(q, count=1, seq=900))[0][0] == "1"
    q.add("j", {})
    for _ in range(5):
        q.add("j", {}, group="g")


def plain_groups(q: Queue) -> None:
    """x, y and z with 7, 3 and 5 jobs and nothing of their own."""
    for gid, n in (("x", 7), ("y", 3), ("z", 5)):
        for _ in range(n):
            q.add("j", {}, group=gid)


def plain_groups_queue_capped(q: Queue) -> None:
    """The same under a queue-wide concurrency of 4: a call pops more
    tickets than it may take; those it did not take go back in line."""
    q.set_global_concurrency(4)
    plain_groups(q)


def claim_ids(q: Queue, count: int, seq: int) -> list[str]:
    return [job_id for job_id, _, _ in claimed(move_to_active(q, count=count, seq=seq))]


@pytest.mark.parametrize(
    ("setup", "batches"),
    [
        (lone_group, [5, 10]),
        (weighted, [6, 20]),
        (capped, [10, 10]),
        (ungrouped_first, [3, 10]),
        (plain_groups, [4, 1, 20]),
        (plain_groups_queue_capped, [10, 10]),
    ],
)
def test_a_batch_claims_what_single_claims_would(
    r: redis.Redis, redis_url: str, qname: str, setup: Setup, batches: list[int]
) -> None:
    """The same adds on two queues: claims of `batches` jobs on one take the
    jobs, in the order, that as many claims of one take on the other; the
    jobs left wait with the scores they had."""
    single, batch = new_queue(redis_url, qname + "-1"), new_queue(redis_url, qname)
    setup(single)
    setup(batch)
    want: list[str] = []
    got: list[str] = []
    seq = 0
    for n in batches:
        for _ in range(n):
            want.extend(claim_ids(single, 1, seq))
            seq += 1
        got.extend(claim_ids(batch, n, seq))
        assert got == want
        for gid in ("g", "a", "b"):
            k1 = f"{single.keys.base}group:{gid}:wait"
            k2 = f"{batch.keys.base}group:{gid}:wait"
            assert r.zrange(k2, 0, -1, withscores=True) == r.zrange(
                k1, 0, -1, withscores=True
            )
        assert r.hget(batch.keys.groups_meta, "pk") == r.hget(
            single.keys.groups_meta, "pk"
        )
        assert batch.get_counts("waiting", "active") == single.get_counts(
            "waiting", "active"
        )
        # The tickets left and the turn served (v, vm) are the same too.
        assert r.zrange(batch.keys.groups_q, 0, -1, withscores=True) == r.zrange(
            single.keys.groups_q, 0, -1, withscores=True
        )
        assert r.hmget(batch.keys.groups_meta, "v", "vm") == r.hmget(
            single.keys.groups_meta, "v", "vm"
        )
    assert got, "the setup left nothing to claim"


def test_a_run_the_call_ends_goes_back_in_place(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A claim of 3 takes the ungrouped job and g's first two tickets' jobs;
    it popped a third ticket (the call wanted three grouped jobs) but took
    one job less: that ticket is back in `groups:q` with its turn, first in
    line."""
    q = new_queue(redis_url, qname)
    ungrouped_first(q)
    tickets = q.keys.groups_q
    before = dict(r.zrange(tickets, 0, -1, withscores=True))
    ids = claim_ids(q, 3, 1)
    assert ids == ["2", "3", "4"]
    after = dict(r.zrange(tickets, 0, -1, withscores=True))
    taken = {t for t in before if t.rsplit(":", 1)[1] in {"3", "4"}}
    assert len(taken) == 2
    assert after == {k: v for k, v in before.items() if k not in taken}
    assert r.zrange(tickets, 0, 0)[0].endswith(":5")
    assert claim_ids(q, 1, 10) == ["5"]
