"""A weight set on a backlog (docs/groups.md, *Weights*): the waiting tickets
take turns at the new weight in chunks of RETAG_CHUNK a call, so that no call
blocks Redis in proportion to the backlog, and a group's jobs never change
order while the chunks go: between calls, adds and claims go on."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import redis

from queues import Queue
from tests.queues.groups.helpers import finish_grouped
from tests.queues.transitions.helpers import claimed, move_to_active

#: includes/retag.lua's RETAG_CHUNK, RETAG_CLAIM_CHUNK and RETAG_GROUP_COST:
#: a call's budget in tickets, and what each group it visits counts for.
CHUNK = 1000
CLAIM_CHUNK = 100
GROUP_COST = 10


def admin(q: Queue, action: str, group: str = "", **args: Any) -> int:
    """One group_admin.lua call, as Queue.set_group makes its first (without
    going on while it answers 2)."""
    return int(
        q.scripts.group_admin(
            (q.keys.groups_meta,), (q.keys.base, action, group, json.dumps(args))
        )
    )


def tickets(r: redis.Redis, q: Queue, gid: str) -> list[tuple[int, str]]:
    """The group's tickets in `groups:q` in the order workers take them:
    (turn, job id)."""
    out = []
    for member, score in r.zrange(q.keys.groups_q, 0, -1, withscores=True):
        group, _key, job_id = member.split(":", 2)
        if group == gid:
            out.append((int(score), job_id))
    return out


def add_jobs(q: Queue, gid: str, n: int) -> list[str]:
    jobs = q.add_bulk(
        [{"name": "j", "data": {}, "opts": {"group": gid}} for _ in range(n)]
    )
    return [j.id for j in jobs]


def settled(r: redis.Redis, q: Queue) -> bool:
    """No re-turn left under way."""
    return not r.exists(
        q.keys.base + "groups:retag", q.keys.base + "groups:retagging"
    ) and (r.hget(q.keys.groups_meta, "rt") is None)


@pytest.mark.parametrize(("before", "after"), [(1, 3), (3, 1), (2, 5), (5, 2)])
def test_a_weight_on_a_large_backlog_goes_in_chunks_in_order(
    q: Queue, r: redis.Redis, before: int, after: int
) -> None:
    """2,500 waiting jobs of group a (weight `before`), b's 30 beside: the
    weight set re-turns at most CHUNK of a's tickets a call, a's jobs stay in
    the order they came after every call, and once done a's tickets hold
    the turns one call used to give them (from the turn after the one
    served, `after` a turn), its tail and index entry where they end."""
    q.set_group("a", weight=before)
    ids = add_jobs(q, "a", 2500)
    add_jobs(q, "b", 30)
    b_before = tickets(r, q, "b")
    old = tickets(r, q, "a")
    replies = [admin(q, "set", "a", weight=after)]
    layouts = [tickets(r, q, "a")]
    while replies[-1] == 2:
        replies.append(admin(q, "retag"))
        layouts.append(tickets(r, q, "a"))
    assert replies == [2, 2, 1]
    expected = [(1 + i // after, job) for i, job in enumerate(ids)]
    for calls, layout in enumerate(layouts, 1):
        assert [job for _, job in layout] == ids  # never out of order
        # At most CHUNK tickets a call took another turn.
        assert (
            sum(1 for t, e in zip(layout, old, strict=True) if t != e) <= calls * CHUNK
        )
    assert layouts[-1] == expected
    last, used = expected[-1][0], (len(ids) - 1) % after + 1
    assert r.zscore(q.keys.groups_tail, "a") == last + used / 1024
    assert r.zscore(q.keys.groups_index, "a") == last
    assert tickets(r, q, "b") == b_before
    assert settled(r, q)


@pytest.mark.parametrize("after", [3, 1])
def test_adds_and_claims_between_chunks_keep_each_group_in_order(
    q: Queue, r: redis.Redis, after: int
) -> None:
    """Between the calls of a's re-turn, a claims 40 jobs (of a and b) and a
    adds 5 more: a's jobs run in the order they came, its new jobs after its
    backlog."""
    q.set_group("a", weight=2)
    ids = add_jobs(q, "a", 2500)
    b_ids = add_jobs(q, "b", 2500)
    assert admin(q, "set", "a", weight=after) == 2
    taken = claimed(move_to_active(q, count=40))
    finish_grouped(q, taken)
    late = add_jobs(q, "a", 5)
    while admin(q, "retag") == 2:
        pass
    took_a = [jid for jid, _, h in taken if h["gid"] == "a"]
    took_b = [jid for jid, _, h in taken if h["gid"] == "b"]
    assert took_a == ids[: len(took_a)]
    assert took_b == b_ids[: len(took_b)]
    assert [job for _, job in tickets(r, q, "a")] == ids[len(took_a) :] + late
    # A weight that packs the backlog re-turns it from the front: the
    # claims took a's share at the new weight. One that spreads it goes
    # from the back (its tail first), so the head kept the old weight's
    # turns until the last call: the claims took a's share at weight 2.
    share = after if after > 2 else 2
    assert abs(len(took_a) - 40 * share / (share + 1)) <= share + 1
    assert settled(r, q)


def test_a_claim_goes_on_with_a_re_turn_an_admin_left(q: Queue, r: redis.Redis) -> None:
    """An admin that stopped after the first call (a process killed between
    calls): claims give the rest of the tickets their turns, CLAIM_CHUNK a
    claim, in order, and leave nothing behind."""
    ids = add_jobs(q, "a", 2500)
    add_jobs(q, "b", 100)
    assert admin(q, "set", "a", weight=4) == 2
    claims = 0
    order = []
    while not settled(r, q):
        taken = claimed(move_to_active(q))
        order += [jid for jid, _, h in taken if h["gid"] == "a"]
        finish_grouped(q, taken)
        claims += 1
        # Each claim gives up to CLAIM_CHUNK - GROUP_COST tickets turns.
        assert claims <= -(-(2500 - CHUNK + GROUP_COST) // (CLAIM_CHUNK - GROUP_COST))
    assert order == ids[: len(order)]
    layout = tickets(r, q, "a")
    assert [job for _, job in layout] == ids[len(order) :]
    # From the turn after the one served on, four a turn.
    v = int(r.hget(q.keys.groups_meta, "v") or 0)
    turns = [t for t, _ in layout]
    assert turns[0] in (v, v + 1)
    assert all(turns.count(t) <= 4 for t in set(turns))
    assert turns == sorted(turns)


def test_a_weight_set_again_midway_runs_once_the_first_ends(
    q: Queue, r: redis.Redis
) -> None:
    """Weight 5 set, then 2 before the first re-turn ended: the one under
    way ends at 5, then the backlog takes turns again at 2, in order."""
    ids = add_jobs(q, "a", 2500)
    assert admin(q, "set", "a", weight=5) == 2
    assert q.set_group("a", weight=2) == 1
    assert tickets(r, q, "a") == [(1 + i // 2, job) for i, job in enumerate(ids)]
    assert settled(r, q)


def test_a_default_weight_re_turns_many_groups_in_chunks(
    q: Queue, r: redis.Redis
) -> None:
    """1,500 groups of 2 jobs and one with a weight of its own: the default
    weight 2 goes over several calls, none giving more than CHUNK tickets or
    CHUNK / GROUP_COST groups new turns; then every group that takes the
    default has its two jobs in the first turn, and the one with its own
    weight kept its turns."""
    for i in range(1500):
        add_jobs(q, f"g{i:04d}", 2)
    q.set_group("own", weight=1)
    own = add_jobs(q, "own", 3)

    def layout() -> dict[str, float]:
        return dict(r.zrange(q.keys.groups_q, 0, -1, withscores=True))

    before = layout()
    replies = [admin(q, "defaults", weight=2)]
    while True:
        now = layout()
        moved = [m for m, turn in now.items() if before[m] != turn]
        assert len(moved) <= CHUNK
        assert len({m.split(":")[0] for m in moved}) <= CHUNK // GROUP_COST
        before = now
        if replies[-1] != 2:
            break
        replies.append(admin(q, "retag"))
    assert len(replies) >= 3000 // CHUNK
    turns: dict[str, set[float]] = {}
    for member, turn in before.items():
        turns.setdefault(member.split(":")[0], set()).add(turn)
    assert all(turns[f"g{i:04d}"] == {1} for i in range(1500))
    assert tickets(r, q, "own") == [(1, own[0]), (2, own[1]), (3, own[2])]
    assert settled(r, q)


def test_obliterate_takes_a_re_turn_under_way(q: Queue, r: redis.Redis) -> None:
    add_jobs(q, "a", 2500)
    assert admin(q, "set", "a", weight=3) == 2
    q.obliterate(force=True)
    assert r.keys(q.keys.base + "*") == []


@pytest.mark.parametrize(
    ("seed", "capped"), [(1, False), (2, False), (3, False), (4, True)]
)
def test_random_weights_adds_claims_and_removals_keep_every_group_in_order(
    q: Queue, r: redis.Redis, seed: int, capped: bool
) -> None:
    """Weights set (own and default) on backlogs over one call, left part-way
    while adds, claims, removals and more weight changes go on: after every
    step each group's tickets are in the order its jobs came, every claim
    takes each group's jobs in that order, and once settled no group has
    more tickets in a turn than its weight but in the one turn where the
    last re-turn's two ends met. `capped`: group c may run one job at a
    time and claimed jobs run until a `finish` step, so c's tickets are
    parked and given turns again in between (its jobs then wait in its zset,
    which a ticket takes in order: only its claims' order is checked)."""
    rng = random.Random(seed)
    groups = ("a", "b", "c")
    if capped:
        q.set_group("c", concurrency=1)
    waiting: dict[str, list[str]] = {g: add_jobs(q, g, 1200) for g in groups}
    own: dict[str, int] = {}  # weights of their own; the others take `default`
    default = 1
    running: list[tuple[str, str, dict[str, str]]] = []
    plain = ("a", "b") if capped else groups

    def check() -> None:
        for g in plain:
            assert [job for _, job in tickets(r, q, g)] == waiting[g]

    for _ in range(40):
        step = rng.choice(("add", "claim", "own", "default", "retag", "remove"))
        g = rng.choice(groups)
        if step == "add":
            waiting[g] += add_jobs(q, g, rng.choice((1, 30, 600)))
        elif step == "claim":
            taken = claimed(move_to_active(q, count=rng.choice((1, 25))))
            for jid, _, h in taken:
                assert waiting[h["gid"]][0] == jid
                waiting[h["gid"]].pop(0)
            running += taken
            if not capped or rng.random() < 0.5:
                finish_grouped(q, running)
                running = []
        elif step == "own":
            own[g] = rng.randint(1, 5)
            admin(q, "set", g, weight=own[g])
        elif step == "default":
            default = rng.randint(1, 5)
            admin(q, "defaults", weight=default)
        elif step == "retag":
            admin(q, "retag")
        elif waiting[g] and g in plain:
            job = q.get_job(rng.choice(waiting[g]))
            assert job is not None
            job.remove()
            waiting[g].remove(job.id)
        check()
    while admin(q, "retag") == 2:
        check()
    check()
    assert settled(r, q)
    for g in plain:
        turns = [t for t, _ in tickets(r, q, g)]
        weight = own.get(g, default)
        # Where the front and the back of a re-turn met, one turn may hold
        # up to twice the weight (claims that moved the turn served on
        # between calls shifted the front's slots by a turn).
        over = [turns.count(t) for t in set(turns) if turns.count(t) > weight]
        assert len(over) <= 1 and all(n <= 2 * weight for n in over), (g, weight)
