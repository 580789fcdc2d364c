"""Grouped jobs waiting (docs/groups.md, *Keys*): each owns one ticket, with
a turn in `groups:q` or parked in its group, and counts, lists, the oldest
waiting, drain and obliterate read them there; `groups:meta` field `pk`
counts the parked tickets. The layout before 2026-12-07 listed every grouped
waiting job in `groups:waiting` too: the first claim after an upgrade drops
that key and counts the parked tickets."""

from __future__ import annotations

import pytest
import redis

from queues import JobState, Queue, defaults, ops
from tests.queues.groups.helpers import finish_grouped
from tests.queues.transitions.helpers import claimed, move_to_active


def pk(q: Queue) -> int:
    return int(q.client.hget(q.keys.groups_meta, "pk") or 0)


def waiting_ids(q: Queue, asc: bool = True) -> list[str]:
    return [str(j.id) for j in q.get_jobs("waiting", asc=asc)]


def test_parked_jobs_are_counted_listed_removed_and_drained(q: Queue) -> None:
    """A group at its cap parks its tickets: its jobs still count as waiting,
    list after the jobs with a turn (page by page too), read as waiting; a
    finish gives one a turn again, a removal and a drain take them out, and
    the parked count follows every step."""
    q.set_group("capped", concurrency=1)
    capped = [str(q.add("j", {}, group="capped").id) for _ in range(4)]
    free = [str(q.add("j", {}, group="free").id) for _ in range(2)]
    running = claimed(move_to_active(q, count=3))
    # Capped's first runs, its second parks at its turn, free's two run.
    assert sorted(j for j, _, _ in running) == sorted([capped[0], *free])
    assert pk(q) == 1
    assert q.get_counts("waiting") == {"waiting": 3}
    assert q.get_group_summary().waiting == 3
    assert waiting_ids(q) == [capped[2], capped[3], capped[1]]  # turns, then parked
    assert [waiting_ids(q)[i] for i in range(3)] == [
        str(q.get_jobs("waiting", i, i, asc=True)[0].id) for i in range(3)
    ]
    assert q.get_job_state(capped[1]) is JobState.WAITING
    assert claimed(move_to_active(q, count=5)) == []  # every ticket parks now
    assert pk(q) == 3 and q.get_counts("waiting") == {"waiting": 3}
    assert sorted(waiting_ids(q)) == sorted(capped[1:])
    assert sorted(waiting_ids(q, asc=False)) == sorted(capped[1:])
    finish_grouped(q, [t for t in running if t[0] == capped[0]])
    assert pk(q) == 2 and q.client.zcard(q.keys.groups_q) == 1  # a slot: a turn
    assert q.get_counts("waiting") == {"waiting": 3}
    assert q.remove_job(capped[3])
    assert pk(q) == 1 and q.get_counts("waiting") == {"waiting": 2}
    assert q.drain() == 2
    assert pk(q) == 0 and q.get_counts("waiting") == {"waiting": 0}
    assert waiting_ids(q) == []
    assert not any(q.client.exists(q.keys.job(j)) for j in capped[1:])


def test_oldest_waiting_reads_the_grouped_job_next_in_line(q: Queue) -> None:
    """The grouped job with the next turn counts for the oldest waiting age;
    a parked one (its group cannot run) does not."""
    q.add("j", {}, group="a", timestamp=2_000_000)
    q.add("j", {}, group="b", timestamp=1_000_000)
    assert q.drive(ops.oldest_waiting(q.keys)) == 2_000_000  # a's turn first
    q.add("j", {}, timestamp=1_500_000)
    assert q.drive(ops.oldest_waiting(q.keys)) == 1_500_000
    q.drain()
    q.pause_group("p")
    q.add("j", {}, group="p", timestamp=1_000_000)
    assert claimed(move_to_active(q)) == [] and pk(q) == 1
    assert q.drive(ops.oldest_waiting(q.keys)) is None
    assert q.get_counts("waiting") == {"waiting": 1}


def test_obliterate_deletes_queued_and_parked_grouped_jobs(
    q: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every grouped waiting job's hash goes, with a turn or parked, two
    jobs a call (a call may stop inside a group's parked tickets)."""
    monkeypatch.setattr(defaults, "OBLITERATE_BATCH", 2)
    q.pause_group("p")
    for _ in range(3):
        q.add("j", {}, group="p")
    assert claimed(move_to_active(q, count=3)) == [] and pk(q) == 3
    for i in range(3):
        q.add("j", {}, group=f"g{i}")
    q.pause()
    q.obliterate()
    assert r.keys(f"{q.keys.base}*") == []


def test_the_first_claim_after_an_upgrade_drops_groups_waiting(q: Queue) -> None:
    """A queue of the layout before 2026-12-07 (no `wl`, no parked count, a
    `groups:waiting` zset): its first claim unlinks the zset and counts the
    parked tickets; the counts are right from there on."""
    q.pause_group("p")
    parked = [str(q.add("j", {}, group="p").id) for _ in range(2)]
    assert claimed(move_to_active(q, count=2)) == [] and pk(q) == 2
    q.add("j", {}, group="a")
    old = q.keys.base + "groups:waiting"
    q.client.zadd(old, {j: 1 for j in parked})
    q.client.hdel(q.keys.groups_meta, "wl", "pk")
    assert q.get_counts("waiting") == {"waiting": 1}  # until a claim migrates
    assert len(claimed(move_to_active(q))) == 1
    assert not q.client.exists(old)
    assert q.client.hget(q.keys.groups_meta, "wl") == "1" and pk(q) == 2
    assert q.get_counts("waiting") == {"waiting": 2}
