"""Groups on the wire (docs/groups.md, docs/protocol.md §6.2): a grouped
job's lock never expires while its lease does, a dead worker's grouped job
goes back to the front of its group, retries and backoff stay in the group,
and the queue's other transitions (state, promote, remove, priority, drain,
obliterate) know grouped jobs."""

from __future__ import annotations

import pytest
import redis

from queues import Queue, ops
from queues.drive import run_sync
from queues.exceptions import InvalidJobId
from queues.groups import group_counts
from queues.state import JobState
from tests.queues.groups.helpers import finish_grouped, server_ms
from tests.queues.transitions.helpers import (
    LOCK_MS,
    NOW,
    claimed,
    entry,
    extend_locks,
    move_stalled,
    move_to_active,
    move_to_delayed,
    move_to_finished,
    retry_job,
)


def test_a_grouped_lock_never_expires_and_a_lapsed_lease_requeues_it(
    q: Queue, r: redis.Redis
) -> None:
    """Claimed, a grouped job's lock has no TTL (a Node worker's stalled check
    skips it) and its worker's lease (one entry per worker, its token less
    the sequence) ends a lock duration later on Redis's clock (the hosts'
    clocks never enter); renewing moves it on; once the lease has lapsed the
    stalled check puts the job back at the front of its group, counts the
    stall, frees its slot, emits `stalled` and drops the lease."""
    first = q.add("j", {}, group="a").id
    second = q.add("j", {}, group="a").id
    leases = q.keys.groups_leases
    before = server_ms(r)
    [(job_id, token, h)] = claimed(move_to_active(q))
    owner = token.rsplit(":", 1)[0]
    assert job_id == first and h["gid"] == "a"
    assert r.pttl(q.keys.lock(first)) == -1
    assert r.zrange(leases, 0, -1) == [owner]
    lease = r.zscore(leases, owner)
    assert lease is not None and before + LOCK_MS <= lease <= server_ms(r) + LOCK_MS
    assert q.get_group("a").active == 1  # type: ignore[union-attr]
    assert q.get_group_summary().active == 1
    assert extend_locks(q, [first], [token], lock_ms=LOCK_MS * 2) == []
    assert r.pttl(q.keys.lock(first)) == -1
    assert (r.zscore(leases, owner) or 0) >= before + 2 * LOCK_MS
    assert move_stalled(q) == []
    r.zadd(leases, {owner: server_ms(r) - 1})  # its worker died: the lease ends
    assert move_stalled(q) == [first]
    assert r.exists(q.keys.lock(first)) == 0 and r.zcard(leases) == 0
    assert [j.id for j in q.get_group_jobs("a")] == [first, second]
    assert r.hget(q.keys.job(first), "stc") == "1"
    info = q.get_group("a")
    assert info is not None and info.active == 0 and info.waiting == 2
    assert q.get_group_summary().active == 0
    assert q.get_job_state(first) is JobState.WAITING
    [(again, _, _)] = claimed(move_to_active(q))
    assert again == first


def test_a_lapsed_lease_takes_back_only_its_workers_grouped_jobs(
    q: Queue, r: redis.Redis
) -> None:
    """Two workers hold grouped jobs, one also an ungrouped job: when one
    worker's lease lapses, only its grouped jobs go back to their groups;
    the other worker's jobs and its own ungrouped job (whose lock expires
    as BullMQ's do) stay active, and finishing a job leaves its worker's
    lease in place for the jobs it still holds."""
    grouped = [q.add("j", {}, group=g).id for g in ("a", "b", "c", "d")]
    plain = q.add("j", {}).id
    theirs = claimed(move_to_active(q, count=3, token="w2"))
    mine = claimed(move_to_active(q, count=2, token="w1"))
    assert sorted(j for j, _, _ in mine + theirs) == sorted(grouped + [plain])
    assert plain in {j for j, _, _ in theirs}
    assert sorted(r.zrange(q.keys.groups_leases, 0, -1)) == ["w1", "w2"]
    assert q.get_group_summary().active == 4
    done, *kept = [(j, t) for j, t, h in theirs if h.get("gid")]
    assert move_to_finished(q, [entry(done[0], token=done[1])])[0] == [0]
    assert r.zscore(q.keys.groups_leases, "w2") is not None
    r.zadd(q.keys.groups_leases, {"w2": server_ms(r) - 1})
    back = sorted(move_stalled(q))
    assert back == sorted(j for j, _ in kept)
    still = set(r.lrange(q.keys.active, 0, -1))
    assert still == {j for j, _, _ in mine} | {plain}
    assert r.zrange(q.keys.groups_leases, 0, -1) == ["w1"]
    assert q.get_group_summary().active == 2
    assert r.pttl(q.keys.lock(plain)) > 0


def test_backoff_and_retry_stay_in_the_group(q: Queue, r: redis.Redis) -> None:
    """A failed attempt with backoff waits in `groups:delayed` (not BullMQ's
    `delayed`), comes back to its group when due; an immediate retry goes
    to the group, never to `wait`."""
    job = q.add("j", {}, group="a", attempts=3).id
    [(jid, token, _)] = claimed(move_to_active(q))
    assert move_to_delayed(q, jid, 1000, token=token) == 0
    assert r.zcard(q.keys.delayed) == 0
    assert r.zscore(q.keys.groups_delayed, job) == NOW + 1000
    assert q.get_job_state(job) is JobState.DELAYED
    assert q.get_counts("delayed", "waiting") == {"delayed": 1, "waiting": 0}
    assert claimed(move_to_active(q, now=NOW + 500)) == []
    [(jid, token, _)] = claimed(move_to_active(q, now=NOW + 1001))
    assert jid == job
    assert retry_job(q, jid, now=NOW + 1002, token=token) == 0
    assert r.llen(q.keys.wait) == 0
    assert [j.id for j in q.get_group_jobs("a")] == [job]


def test_promote_remove_priority_and_state(q: Queue, r: redis.Redis) -> None:
    """Promote moves a grouped delayed job to its group; change_priority
    re-orders inside the group; remove takes a waiting one out of its group
    and the counts; get_state finds both without the lists."""
    late = q.add("j", {}, group="a", delay=60_000)
    assert q.get_job_state(late.id) is JobState.DELAYED
    late.promote()
    assert [j.id for j in q.get_group_jobs("a")] == [late.id]
    other = q.add("j", {}, group="a")
    q.get_job(other.id).change_priority(priority=0, lifo=True)  # type: ignore[union-attr]
    assert [j.id for j in q.get_group_jobs("a")] == [other.id, late.id]
    assert q.remove_job(late.id) is True
    assert [j.id for j in q.get_group_jobs("a")] == [other.id]
    assert q.get_group("a").waiting == 1  # type: ignore[union-attr]
    assert q.get_counts("waiting") == {"waiting": 1}


def test_drain_and_obliterate_take_the_groups(q: Queue, r: redis.Redis) -> None:
    """Drain deletes the groups' waiting (and, asked, delayed) jobs;
    obliterate leaves no group key behind."""
    for g in ("a", "b"):
        q.add("j", {}, group=g)
    q.add("j", {}, group="a", delay=5000)
    assert q.drain(delayed=True) == 3
    assert q.get_counts("waiting", "delayed") == {"waiting": 0, "delayed": 0}
    q.add("j", {}, group="c")
    q.set_group("c", concurrency=1)
    q.pause()
    q.obliterate()
    assert [k for k in r.scan_iter(q.keys.base + "*")] == []


def test_a_producer_job_naming_a_group_in_wait_is_adopted(
    q: Queue, r: redis.Redis
) -> None:
    """A job another client put in `wait` with `opts.group = {id}` (a Node
    producer's) is moved to its group on the ungrouped jobs' turn, and turns
    go on from there: its group (n) has had no turn yet, so it takes the
    turn being served, before a's second job."""
    a1 = q.add("j", {}, group="a").id
    a2 = q.add("j", {}, group="a").id
    plain = q.add("j", {}).id
    r.hset(q.keys.job(plain), "opts", '{"attempts":0,"group":{"id":"n"}}')
    [(first, _, _)] = claimed(move_to_active(q))
    assert first == a1
    assert q.get_job_state(plain) is JobState.WAITING  # still in `wait`
    [(second, _, h)] = claimed(move_to_active(q))
    assert second == plain and h["gid"] == "n"
    assert r.llen(q.keys.wait) == 0
    assert r.hget(q.keys.job(plain), "gid") == "n"
    [(third, _, _)] = claimed(move_to_active(q))
    assert third == a2


def test_groups_page_turn_and_summary(q: Queue) -> None:
    """get_groups orders by backlog; get_group_turn counts the places ahead."""
    for g, n in (("a", 1), ("b", 3), ("c", 2)):
        for _ in range(n):
            q.add("j", {}, group=g)
    assert [g.id for g in q.get_groups()] == ["b", "c", "a"]
    assert [q.get_group_turn(g) for g in ("a", "b", "c")] == [0, 1, 2]
    assert q.get_group_turn("zz") is None and q.get_group("zz") is None
    s = q.get_group_summary()
    assert (s.groups, s.waiting, s.active) == (3, 6, 0)
    assert [j.id for j in q.get_group_jobs("b")] == [
        j.id for j in q.get_group_jobs("b", 0, -1)
    ]


def test_idle_groups_without_settings_are_forgotten(q: Queue, r: redis.Redis) -> None:
    """Once a group has nothing waiting or running it leaves the index and
    its hash goes, unless it has settings (a paused group stays)."""
    for g in ("a", "b", "c"):
        q.add("j", {}, group=g)
    q.set_group("b", weight=2)
    q.pause_group("c")
    for _ in range(2):
        [(jid, token, _h)] = claimed(move_to_active(q))
        assert move_to_finished(q, [entry(jid, token=token)])[0] == [0]
    assert claimed(move_to_active(q)) == []
    assert q.count_groups() == 2
    assert [g.id for g in q.get_groups()] == ["c", "b"]
    assert r.exists(q.keys.group("a")) == 0
    assert q.get_group("a") is None


def test_resuming_the_queue_wakes_a_worker_for_grouped_jobs(
    q: Queue, r: redis.Redis
) -> None:
    """Only grouped jobs wait: resume still leaves the base marker a blocked
    worker wakes on (BullMQ's resume looks at `wait` and `prioritized`)."""
    q.pause()
    q.add("j", {}, group="a")
    r.delete(q.keys.marker)
    q.resume()
    assert r.zscore(q.keys.marker, "0") == 0


def test_job_lists_counts_and_oldest_include_grouped_jobs(q: Queue) -> None:
    """The waiting and delayed pages list grouped jobs after BullMQ's lists
    (grouped waiting ones by when they became ready), and the oldest waiting
    time sees them."""
    old = q.add("j", {}, group="a", timestamp=1_000)
    plain = q.add("j", {}, timestamp=5_000)
    newer = q.add("j", {}, group="b", timestamp=2_000)
    later = q.add("j", {}, group="a", delay=60_000)
    assert [j.id for j in q.get_jobs("waiting")] == [plain.id, newer.id, old.id]
    oldest_first = [plain.id, old.id, newer.id]
    assert [j.id for j in q.get_jobs("waiting", asc=True)] == oldest_first
    assert [j.id for j in q.get_jobs("delayed")] == [later.id]
    assert q.get_counts("waiting", "delayed") == {"waiting": 3, "delayed": 1}
    assert run_sync(ops.oldest_waiting(q.keys), q.client) == 1_000


def test_group_counts_scan_active_only_when_asked(q: Queue) -> None:
    """Readers that do not use running counts (scan 0: turns, the series
    sample) do not walk `active`; the others count a group's running jobs
    from it (a group under no limit keeps no count)."""
    for _ in range(3):
        q.add("j", {}, group="a")
    assert len(claimed(move_to_active(q, count=2))) == 2

    def counts(**scan: int) -> ops.Op[list[int]]:
        reply = yield group_counts(q.keys, ["a"], **scan)
        return [int(n) for n in reply[0][:2]]  # waiting, running

    assert run_sync(counts(), q.client) == [1, 2]
    assert run_sync(counts(scan=0), q.client) == [1, 0]


def test_a_job_id_cannot_name_a_group_key(q: Queue) -> None:
    """`group:<id>:wait` would make a job hash of a group's wait set."""
    for bad in ("group:a:wait", "groups:a:b"):
        with pytest.raises(InvalidJobId):
            q.add("j", {}, job_id=bad)


def test_a_burst_of_producer_grouped_jobs_is_adopted_together(
    q: Queue, r: redis.Redis
) -> None:
    """Another client's burst (3 of n, then 3 of m, all in `wait`) is moved to
    its groups at the first claim, so n and m alternate from the start (in
    one turn, groups go in id order: m, then n)."""
    ids = [q.add("j", {}).id for _ in range(6)]
    for i, job_id in enumerate(ids):
        group = "n" if i < 3 else "m"
        r.hset(q.keys.job(job_id), "opts", f'{{"group":{{"id":"{group}"}}}}')
    taken = [claimed(move_to_active(q))[0][0] for _ in range(6)]
    assert r.llen(q.keys.wait) == 0
    assert taken == [ids[3], ids[0], ids[4], ids[1], ids[5], ids[2]]


def test_a_group_seated_or_given_settings_while_idle_bound_is_kept(
    q: Queue, r: redis.Redis
) -> None:
    """Groups whose last tickets were taken are forgotten by a later claim
    (here the next one, whose turn comes after theirs), once their jobs are
    done. A job added meanwhile, or a setting of its own, keeps a group: it
    stays in the index with its count."""
    for g in ("a", "b", "c"):
        q.add("j", {}, group=g)
    taken = claimed(move_to_active(q, count=3))
    assert sorted(h["gid"] for _, _, h in taken) == ["a", "b", "c"]
    later = q.add("j", {}, group="a").id  # a gets a ticket again while its job runs
    q.set_group("b", weight=2)  # something of its own
    finish_grouped(q, taken)
    c = q.get_group("c")
    assert c is None or (c.waiting, c.active) == (0, 0)
    a = q.get_group("a")
    assert a is not None and (a.waiting, a.active) == (1, 0)
    [(again, _, _)] = claimed(move_to_active(q))
    assert again == later
    assert sorted(g.id for g in q.get_groups()) == ["a", "b"]  # c is forgotten
    b = q.get_group("b")
    assert b is not None and (b.waiting, b.active) == (0, 0)
    assert r.hget(q.keys.groups_active, "c") is None
    assert r.exists(q.keys.group("c") + ":q") == 0


def test_jobs_waiting_in_the_layout_before_tickets_are_taken_after_an_upgrade(
    q: Queue, r: redis.Redis
) -> None:
    """Grouped jobs a Bullpen before tickets left waiting (each group's jobs
    in its zset, the rotation in `groups:ready`, a flagged running count)
    are all taken after the upgrade, each once, the groups in turn and each
    group's in its order; the old keys go and no count is left."""
    ids = {g: [q.add("j", {}, group=g).id for _ in range(3)] for g in ("a", "b")}
    base = q.keys.base
    r.delete(
        q.keys.groups_q, q.keys.groups_tail, base + "group:a:q", base + "group:b:q"
    )
    for g, jobs in ids.items():
        r.zadd(base + f"group:{g}:wait", {j: n for n, j in enumerate(jobs)})
        r.rpush(base + "groups:ready", g)
        r.sadd(base + "groups:seated", g)
        r.zadd(q.keys.groups_index, {g: 3})
    r.hset(q.keys.groups_active, "a", 2**40)  # the old idle-bound flag
    taken = [claimed(move_to_active(q))[0][0] for _ in range(6)]
    group_of = {j: g for g, jobs in ids.items() for j in jobs}
    assert [group_of[j] for j in taken] == ["a", "b"] * 3
    assert [j for j in taken if group_of[j] == "a"] == ids["a"]
    assert [j for j in taken if group_of[j] == "b"] == ids["b"]
    assert claimed(move_to_active(q)) == []
    assert r.exists(base + "groups:ready", base + "groups:seated") == 0
    assert r.hget(q.keys.groups_active, "a") is None
    a = q.get_group("a")
    assert a is not None and (a.waiting, a.active) == (0, 3)
