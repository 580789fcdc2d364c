"""Why is this grouped job waiting? Each group situation is built for real in
the test Redis (the queue's group scripts, a claim, a connected worker) and the
reason's code and numbers are asserted: `group_paused`, `quota_exhausted`,
`group_concurrency`, `group_rate_limited`, then `group_turn`, after the
queue-level reasons."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from gpu_workers.quota import next_midnight_ms
from gpu_workers.waiting import explain
from queues import Queue, ops
from tests.gpu_workers.waiting_helpers import codes, connected_worker, reason_of
from tests.helpers import round_trips
from tests.queues.transitions.helpers import claimed, move_to_active


def _claim(q: Queue) -> str:
    """Claim one job as a worker does; its id."""
    got = claimed(move_to_active(q, now=ops.now_ms()))
    assert got, "nothing was claimed"
    return str(got[0][0])


def test_group_turn_counts_groups_and_jobs_ahead(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """Groups a and b with two jobs each: b's second job has one group ahead
    of its group's turn (a, first in the turn served) and one job of its
    own group ahead of it; a's first is next, its group's turn now."""
    a1 = q.add("job", {}, group="a")
    q.add("job", {}, group="a")
    q.add("job", {}, group="b")
    b2 = q.add("job", {}, group="b")
    with connected_worker(redis_url, q):
        first = reason_of(r, q, a1.id)
        second = reason_of(r, q, b2.id)
    assert first is not None and second is not None
    assert codes(first) == ["group_turn"]
    assert first.numbers == {"group": "a", "groups_ahead": 0, "ahead_in_group": 0}
    assert codes(second) == ["group_turn"]
    assert second.numbers == {"group": "b", "groups_ahead": 1, "ahead_in_group": 1}
    assert "1 group takes its turn before group b's" in second.message
    assert second.as_dict()["groups_ahead"] == 1


def test_paused_group_comes_first_then_its_turn(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """A paused group: `group_paused`, its turn beside it."""
    job = q.add("job", {}, group="acme")
    q.pause_group("acme")
    with connected_worker(redis_url, q):
        reason = reason_of(r, q, job.id)
    assert reason is not None
    assert codes(reason) == ["group_paused", "group_turn"]
    assert reason.numbers == {"group": "acme"}
    assert reason.also[0].numbers["ahead_in_group"] == 0


def test_quota_hold_reads_as_quota_exhausted(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """A group held for its quota: `quota_exhausted` with what was used of
    which budget, until the next UTC midnight; another hold reads as
    `group_paused` with the hold's reason."""
    job = q.add("job", {}, group="acme")
    now_s = ops.now_ms() / 1000
    until = next_midnight_ms(now_s)
    info = {"used_s": 12.5, "budget_s": 10.0, "day": "20260101"}
    q.hold_group("acme", "quota", until_ms=until, info=info)
    with connected_worker(redis_url, q):
        reason = reason_of(r, q, job.id)
        assert reason is not None
        assert codes(reason) == ["quota_exhausted", "group_turn"]
        numbers = reason.numbers
        assert numbers["used_s"] == 12.5 and numbers["budget_s"] == 10.0
        assert numbers["until_ms"] == until and numbers["day"] == "20260101"
        assert 0 < numbers["in_ms"] <= 86_400_000
        assert "12 of 10 GPU-seconds" in reason.message
        q.release_group("acme")
        q.hold_group("acme", "billing")
        held = reason_of(r, q, job.id)
    assert held is not None and held.code == "group_paused"
    assert held.numbers["hold"] == "billing" and held.numbers["until_ms"] is None


def test_group_concurrency(r: redis.Redis, redis_url: str, q: Queue) -> None:
    """Concurrency 1 and one of the group's jobs active: `group_concurrency`
    1 of 1; another group's job is not held by it."""
    q.set_group("acme", concurrency=1)
    q.add("job", {}, group="acme")
    job = q.add("job", {}, group="acme")
    other = q.add("job", {}, group="beta")
    _claim(q)
    with connected_worker(redis_url, q):
        reason = reason_of(r, q, job.id)
        free = reason_of(r, q, other.id)
    assert reason is not None and free is not None
    assert codes(reason) == ["group_concurrency", "group_turn"]
    assert reason.numbers == {"group": "acme", "active": 1, "concurrency": 1}
    assert "1 of 1" in reason.message
    assert codes(free) == ["group_turn"]


def test_group_rate_limited(r: redis.Redis, redis_url: str, q: Queue) -> None:
    """One job a minute, one started: `group_rate_limited` until the window
    ends (within the minute from now)."""
    q.set_group("acme", rate_max=1, rate_duration_ms=60_000)
    q.add("job", {}, group="acme")
    job = q.add("job", {}, group="acme")
    before = ops.now_ms()
    _claim(q)
    with connected_worker(redis_url, q):
        reason = reason_of(r, q, job.id)
    assert reason is not None
    assert codes(reason) == ["group_rate_limited", "group_turn"]
    numbers = reason.numbers
    assert numbers["max"] == 1 and numbers["duration_ms"] == 60_000
    assert before < numbers["until_ms"] <= ops.now_ms() + 60_000
    assert 0 < numbers["in_ms"] <= 60_000


def test_queue_reasons_come_before_the_groups(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """A paused queue with no worker: `queue_paused`, `no_worker`, then the
    group's pause and turn; an ungrouped job of the same queue still gets
    `queued` in the line of `wait`."""
    job = q.add("job", {}, group="acme")
    plain = q.add("job", {})
    q.pause_group("acme")
    q.pause()
    reason = reason_of(r, q, job.id)
    assert reason is not None
    assert codes(reason) == ["queue_paused", "no_worker", "group_paused", "group_turn"]
    q.resume()
    with connected_worker(redis_url, q):
        line = reason_of(r, q, plain.id)
    assert line is not None and codes(line) == ["queued"]


def test_reads_stay_bounded_over_many_grouped_jobs(
    r: redis.Redis, redis_url: str, q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of 40 grouped jobs over 20 groups costs the same round trips as
    a page of 2: one more than an ungrouped page, whatever the count."""

    def page(n: int) -> tuple[int, dict[str, Any]]:
        jobs = [q.add("job", {}, group=f"g{i % 20}") for i in range(n)]
        listed = [(q.get_job(j.id), "waiting") for j in jobs]
        taken = round_trips(r, monkeypatch)
        # workers=None: as if CLIENT LIST were refused (workers unknown).
        found = explain(r, q.prefix, q.name, listed, workers=None)
        monkeypatch.undo()
        return len(taken), {k: v.code for k, v in found.items()}

    small, small_codes = page(2)
    large, large_codes = page(40)
    assert large == small
    assert set(large_codes.values()) == {"group_turn"}
    assert len(large_codes) == 40


def test_a_delayed_grouped_job_is_delayed_until_its_time(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """A grouped job added with a delay waits in `groups:delayed`: `delayed`
    until its due time, as an ungrouped one."""
    before = ops.now_ms()
    job = q.add("job", {}, group="acme", delay=60_000)
    with connected_worker(redis_url, q):
        reason = reason_of(r, q, job.id)
    assert reason is not None and codes(reason) == ["delayed"]
    assert before + 60_000 <= reason.numbers["until_ms"] <= ops.now_ms() + 60_000
