"""What a claim and a finish write of groups once per call (docs/protocol.md
§6.2): a worker's lease left as it is when the worker says it renewed it
lately (and set when it is gone), and a finish that claims in the same call
reading `groups:meta` once and writing `running` once, without missing what
the finish changed."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import redis

from queues import Job, Queue
from tests.queues.groups.helpers import completed, running, server_ms
from tests.queues.transitions.helpers import (
    LOCK_MS,
    claimed,
    entry,
    move_to_active,
    move_to_finished,
)


def calls(r: redis.Redis, command: str) -> int:
    """How many times Redis ran `command` since the last CONFIG RESETSTAT."""
    stats = r.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0))


def grouped_entry(job: tuple[str, str, dict[str, str]]) -> dict[str, Any]:
    e = entry(job[0], token=job[1])
    e["gid"] = job[2]["gid"]
    return e


def test_a_claim_saying_leased_keeps_the_lease_it_finds_and_sets_a_missing_one(
    q: Queue, r: redis.Redis
) -> None:
    """`leased` in a claim's opts leaves the worker's lease where it is (no
    TIME, no ZADD) while the lease is there; a lease gone (a lapsed one the
    stalled check dropped, an obliterated queue) is set again whatever the
    worker believed; without `leased` every claim of grouped jobs sets it."""
    for g in ("a", "b", "c", "d"):
        q.add("j", {}, group=g)
    leases = q.keys.groups_leases
    claimed(move_to_active(q, token="w1"))
    far = server_ms(r) + 5 * LOCK_MS
    r.zadd(leases, {"w1": far})
    r.config_resetstat()
    [(_, _, h)] = claimed(move_to_active(q, token="w1", leased=True))
    assert h["gid"] == "b"
    assert r.zscore(leases, "w1") == far
    assert calls(r, "time") == 0 and calls(r, "zrank") == 1
    r.zrem(leases, "w1")
    before = server_ms(r)
    claimed(move_to_active(q, token="w1", leased=True))
    lease = r.zscore(leases, "w1")
    assert lease is not None and before + LOCK_MS <= lease <= server_ms(r) + LOCK_MS
    r.zadd(leases, {"w1": far})
    claimed(move_to_active(q, token="w1"))
    assert (r.zscore(leases, "w1") or 0) < far


def test_a_finish_that_claims_writes_running_once_and_sees_what_it_unparked(
    q: Queue, r: redis.Redis
) -> None:
    """Plain groups: a finish of one grouped job that claims the next writes
    no `running` change (one down, one up) and reads `groups:meta` once.
    Group c capped at 1: its second job's ticket is parked while the first
    runs; the finish of the first unparks it and the same call's claim,
    reading `groups:meta` after that, takes it. `running` stays the number of
    grouped jobs in `active` throughout."""
    for g in ("a", "b"):
        q.add("j", {}, group=g)
    [first] = claimed(move_to_active(q))
    assert first[2]["gid"] == "a"
    r.config_resetstat()
    reply = move_to_finished(q, [grouped_entry(first)], fetch=1, seq=1)
    assert reply[0] == [0]
    [second] = claimed(reply[1:])
    assert second[2]["gid"] == "b"
    assert calls(r, "hincrby") == 2  # the jobs' `atm` and `ats`: no `running`
    assert r.hget(q.keys.groups_meta, "running") == "1"
    reply = move_to_finished(q, [grouped_entry(second)], fetch=1, seq=2)
    assert reply[0] == [0] and claimed(reply[1:]) == []
    assert r.hget(q.keys.groups_meta, "running") == "0"

    q.set_group("c", concurrency=1)
    one, two = (q.add("j", {}, group="c").id for _ in range(2))
    [taken] = claimed(move_to_active(q, count=2, seq=3))
    assert taken[0] == one
    info = q.get_group("c")
    assert info is not None and info.active == 1 and info.state(0) == "at-concurrency"
    reply = move_to_finished(q, [grouped_entry(taken)], fetch=2, seq=5)
    assert reply[0] == [0]
    assert [j for j, _, _ in claimed(reply[1:])] == [two]
    assert r.hget(q.keys.groups_meta, "running") == "1"
    info = q.get_group("c")
    assert info is not None and info.active == 1 and info.waiting == 0
    assert q.get_group_summary().active == 1


def test_a_finish_that_cannot_claim_still_counts_its_jobs_down(
    q: Queue, r: redis.Redis
) -> None:
    """The finish's `running` change is written when its claim ends early (a
    paused queue answers before any job) or finds nothing."""
    for g in ("a", "b", "c"):
        q.add("j", {}, group=g)
    taken = claimed(move_to_active(q, count=2))
    assert r.hget(q.keys.groups_meta, "running") == "2"
    q.pause()
    reply = move_to_finished(q, [grouped_entry(taken[0])], fetch=1, seq=2)
    assert reply[0] == [0] and claimed(reply[1:]) == []
    assert r.hget(q.keys.groups_meta, "running") == "1"
    q.resume()
    reply = move_to_finished(q, [grouped_entry(taken[1])], fetch=1, seq=3)
    [last] = claimed(reply[1:])
    assert r.hget(q.keys.groups_meta, "running") == "1"
    reply = move_to_finished(q, [grouped_entry(last)], fetch=1, seq=4)
    assert claimed(reply[1:]) == []
    assert r.hget(q.keys.groups_meta, "running") == "0"
    assert q.get_group_summary().active == 0


def test_a_worker_renews_its_lease_once_per_quarter_lock_duration(
    q: Queue, redis_url: str, qname: str, r: redis.Redis
) -> None:
    """A real worker's claims of grouped jobs: the first sets its lease, the
    next within a quarter of the lock duration say `leased` and leave it
    (fewer ZADDs than claims), and the lease never ends before a job it
    covers was claimed plus 3/4 of the lock duration."""
    for i in range(300):
        q.add("j", {"i": i}, group=f"g{i % 7}")
    starts: list[int] = []

    async def process(job: Job) -> Any:
        starts.append(int(time.time() * 1000))  # (this host's clock is Redis's)

    r.config_resetstat()

    async def main() -> None:
        async with running(redis_url, qname, process, 4) as aq:
            await completed(aq, 300)

    asyncio.run(main())
    claims = calls(r, "fcall") + calls(r, "evalsha")
    assert claims > 10
    leases = r.zrange(q.keys.groups_leases, 0, -1, withscores=True)
    assert len(leases) == 1
    assert leases[0][1] >= max(starts) + 30_000 * 3 / 4
    # Redis's clock is read for each lease set (the claims' and the lock
    # renewal's) and by the stalled check: not once a claim.
    assert 1 <= calls(r, "time") <= claims / 4
