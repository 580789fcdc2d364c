"""What a group leaves in Redis once its jobs have run (docs/groups.md,
*Forgetting groups*): drained groups are forgotten while claims go on and
while the queue idles, and a group's list of tickets keeps only the tickets
from the turn served on, however long its backlog lasts."""

from __future__ import annotations

import redis

from queues import Queue
from tests.queues.groups.helpers import finish_grouped
from tests.queues.transitions.helpers import claimed, move_to_active

#: includes/groups.lua's IDLE_SWEEP: drained groups an idle claim forgets.
IDLE_SWEEP = 256


def tails(r: redis.Redis, q: Queue) -> int:
    """Groups with a tail (the pin at +inf that keeps the zset a skiplist
    is none)."""
    return int(r.zcount(q.keys.groups_tail, "-inf", "(+inf"))


def test_drained_groups_are_forgotten_while_the_queue_idles(
    q: Queue, r: redis.Redis
) -> None:
    """300 one-job groups drained in the turn served (the claims that took
    them popped no less than they asked, so none saw `groups:q` empty): the
    claims that find nothing left forget them, IDLE_SWEEP a call, tickets
    lists and all."""
    total = IDLE_SWEEP + 44
    for i in range(total):
        q.add("j", {}, group=f"g{i:03d}")
    for _ in range(total // 100):
        taken = claimed(move_to_active(q, count=100))
        assert len(taken) == 100
        finish_grouped(q, taken)
    assert q.count_groups() == total
    counts = []
    for _ in range(3):
        assert claimed(move_to_active(q)) == []
        counts.append(q.count_groups())
    assert counts == [total - IDLE_SWEEP, 0, 0]
    assert tails(r, q) == 0
    assert not r.keys(q.keys.base + "group:*")


def test_groups_left_below_the_turn_served_are_swept_on_in_that_turn(
    q: Queue, r: redis.Redis
) -> None:
    """40 one-job groups and y, z with 5 jobs each share the first turn; a
    claim takes it whole. Each claim after moves the turn served or not: the
    40 fall below it and leave the index 17 a claim (16, and one for the job
    the claim took), the next claim in the same turn going on where the last
    one stopped, until only y and z are left. Forgotten while their jobs
    run, the 40 are still the queue's groups (listed after the index's,
    counted, found by id) until those jobs end."""
    for i in range(40):
        q.add("j", {}, group=f"a{i:02d}")
    for gid in ("y", "z"):
        for _ in range(5):
            q.add("j", {}, group=gid)
    taken = claimed(move_to_active(q, count=42))
    assert len(taken) == 42
    counts = [r.zcard(q.keys.groups_index)]
    for _ in range(4):
        [(_jid, _token, h)] = claimed(move_to_active(q))
        counts.append(r.zcard(q.keys.groups_index))
    # y (turn 2), z (turn 2, same turn), y (turn 3), z (turn 3)
    assert counts == [42, 42 - 17, 42 - 34, 2, 2]
    running = [f"a{i:02d}" for i in range(40)]
    # (y and z wait 2 each: the index's ties come in reverse order of id)
    assert [g.id for g in q.get_groups(0, -1)] == ["z", "y", *running]
    assert [g.id for g in q.get_groups(0, 4)] == ["z", "y", "a00", "a01", "a02"]
    assert [g.id for g in q.get_groups(38, 40)] == ["a36", "a37", "a38"]
    assert [g.id for g in q.get_groups(41, 60)] == ["a39"]
    assert q.get_groups(42, 50) == []
    assert q.count_groups() == q.get_group_summary().groups == 42
    a00 = q.get_group("a00")
    assert a00 is not None and (a00.waiting, a00.active) == (0, 1)
    finish_grouped(q, [t for t in taken if t[2]["gid"].startswith("a")])
    assert [g.id for g in q.get_groups(0, -1)] == ["z", "y"]
    assert q.count_groups() == q.get_group_summary().groups == 2


def test_groups_that_come_and_go_under_load_do_not_pile_up(
    q: Queue, r: redis.Redis
) -> None:
    """Customers with one job each keep coming while workers keep taking them
    (the queue never idles): each joins the turn after the one served, so
    every turn ends, and the groups drained in it are forgotten once the next
    one is served. 200 groups come and go; the groups and ticket lists left
    are those of the last turn or two, not one for every customer seen."""
    for i in range(40):
        for k in range(5):
            q.add("j", {}, group=f"c{i:03d}-{k}")
        taken = claimed(move_to_active(q, count=5))
        assert len(taken) == 5
        finish_grouped(q, taken)
    assert q.get_counts("waiting") == {"waiting": 0}
    assert q.count_groups() <= 10
    assert tails(r, q) <= 10
    assert len(r.keys(q.keys.base + "group:*")) <= 10


def test_a_group_that_always_has_a_backlog_keeps_a_short_list_of_tickets(
    q: Queue, r: redis.Redis
) -> None:
    """A customer who keeps adding while its jobs run never drains: its list
    of tickets (counts, ranks) keeps the tickets from the turn served on,
    not one for every job it ever had (each add drops those before it)."""
    for _ in range(10):
        q.add("j", {}, group="g")
    for _ in range(30):
        taken = claimed(move_to_active(q, count=5))
        assert len(taken) == 5
        finish_grouped(q, taken)
        for _ in range(5):
            q.add("j", {}, group="g")
    g = q.get_group("g")
    assert g is not None and g.waiting == 10
    assert r.zcard(q.keys.group("g") + ":q") <= 10 + 5
    assert len(q.get_group_jobs("g")) == 10


def test_the_tails_stay_a_skiplist_and_the_pin_is_no_group(
    q: Queue, r: redis.Redis
) -> None:
    """`groups:tail` is written at every grouped add; as a listpack (under
    129 groups) each write parses every tail's score text, so a member no
    group id can be keeps it a skiplist. The pin is never listed, counted,
    re-turned by a default weight, or swept, and goes with obliterate."""
    for gid in ("a", "b", "c"):
        q.add("j", {}, group=gid)
    assert r.object("encoding", q.keys.groups_tail) == "skiplist"
    assert tails(r, q) == 3
    assert q.count_groups() == 3
    assert sorted(g.id for g in q.get_groups()) == ["a", "b", "c"]
    q.set_group_defaults(weight=2)  # re-turns every group with tickets
    assert len(claimed(move_to_active(q, count=3))) == 3
    assert claimed(move_to_active(q)) == []  # idle: every drained group goes
    assert tails(r, q) == 0
    assert r.zcard(q.keys.groups_index) == 0  # (listed while their jobs run)
    q.obliterate(force=True)
    assert r.exists(q.keys.groups_tail) == 0


def test_what_an_older_bullpen_left_is_served_and_cleaned_up(
    q: Queue, r: redis.Redis
) -> None:
    """State a Bullpen before 2026-12-06 (afternoon) left: a newcomer's
    ticket in the turn served (its id sorted after the last ticket taken),
    a tail zset without its pin (a listpack), a group's list with entries
    before the turn served. Every job is still taken once, in ticket order;
    the group's next add trims its list, a new group pins the tail, and an
    idle claim forgets the drained groups."""
    a = [q.add("j", {}, group="a").id for _ in range(3)]
    b = q.add("j", {}, group="b").id
    [(first, _, _)] = claimed(move_to_active(q))
    assert first == a[0]  # turn 1: a, then b
    c = q.add("j", {}, group="c").id  # turn 2 now; the old rule put it in 1
    tickets, c_list = q.keys.groups_q, q.keys.group("c") + ":q"
    [c_ticket] = r.zrange(c_list, 0, -1)
    r.zadd(tickets, {c_ticket: 1})
    r.zadd(c_list, {c_ticket: 1})
    old_tails = dict(r.zrange(q.keys.groups_tail, 0, -1, withscores=True))
    old_tails.pop("~" * 65)
    old_tails["c"] = 1 + 1 / 1024
    r.delete(q.keys.groups_tail)
    r.zadd(q.keys.groups_tail, old_tails)
    assert r.object("encoding", q.keys.groups_tail) == "listpack"
    a_list = q.keys.group("a") + ":q"
    r.zadd(a_list, {f"a:{n:016d}:{n}": 0 for n in range(900, 905)})  # long taken
    order = [j for j, _, _ in claimed(move_to_active(q, count=3))]
    assert order == [b, c, a[1]]  # c keeps the turn it was given
    later = q.add("j", {}, group="a").id
    assert r.zcount(a_list, "-inf", "(2") == 0  # the add dropped what was taken
    q.add("j", {}, group="d")
    assert r.object("encoding", q.keys.groups_tail) == "skiplist"
    rest = [j for j, _, _ in claimed(move_to_active(q, count=10))]
    assert sorted(rest) == sorted([a[2], later, str(int(later) + 1)])
    assert claimed(move_to_active(q)) == []
    assert tails(r, q) == 0
    assert r.zcard(q.keys.groups_index) == 0  # (listed while their jobs run)
