"""move_to_wait (docs/protocol.md §4.9): an active job given back untouched
to the front of the line, as BullMQ 6.7.0's moveJobFromActiveToWait."""

from __future__ import annotations

import redis

from queues import Queue

from .helpers import (
    NOW,
    add_active,
    clear_events,
    events,
    job_hash,
    lst,
    markers,
    move_to_active,
    move_to_wait,
    new_queue,
    priority_score,
    zset,
)


def test_to_the_front_of_wait_attempts_untouched(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """It leaves active for the end of `wait` that is taken next (RPUSH),
    lock and stalled mark gone, atm and ats as they were, a base marker,
    `waiting {prev=active}`; the next claim takes it before older jobs."""
    q = new_queue(redis_url, qname)
    add_active(q, attempts=3)
    q.add("older", timestamp=NOW)
    r.sadd(q.keys.stalled, "1")
    r.delete(q.keys.marker)
    clear_events(r, q)
    before = job_hash(r, q, "1")
    assert move_to_wait(q, "1") == 0
    assert lst(r, q.keys.wait) == ["2", "1"]
    assert not r.exists(q.keys.active, q.keys.lock("1"), q.keys.stalled)
    after = job_hash(r, q, "1")
    assert after.get("atm") == before.get("atm") and after["ats"] == before["ats"]
    assert markers(r, q) == {"0": 0.0}
    assert events(r, q) == [{"event": "waiting", "jobId": "1", "prev": "active"}]
    assert move_to_active(q, now=NOW + 1, seq=1)[0][0] == "1"


def test_a_prioritized_job_goes_first_among_its_priority(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Before the jobs of its priority that were there first, after those of
    a better priority."""
    q = new_queue(redis_url, qname)
    q.add("p", priority=3, timestamp=NOW)
    move_to_active(q)
    q.add("same", priority=3, timestamp=NOW)
    q.add("better", priority=1, timestamp=NOW)
    assert move_to_wait(q, "1") == 0
    assert [m for m, _ in zset(r, q.keys.prioritized)] == ["3", "1", "2"]
    assert zset(r, q.keys.prioritized)[1] == ("1", float(priority_score(3, 0)))
    assert not r.exists(q.keys.wait)


def test_paused_no_marker(r: redis.Redis, redis_url: str, qname: str) -> None:
    q = new_queue(redis_url, qname)
    add_active(q)
    q.pause()
    r.delete(q.keys.marker)
    assert move_to_wait(q, "1") == 0
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.marker)


def test_refused_without_the_lock(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Another token, no lock, a job not active, a missing job: refused with
    BullMQ's codes, nothing moved."""
    q = new_queue(redis_url, qname)
    add_active(q)
    assert move_to_wait(q, "1", token="w2:0") == -6
    assert lst(r, q.keys.active) == ["1"] and r.exists(q.keys.lock("1"))
    r.delete(q.keys.lock("1"))
    assert move_to_wait(q, "1") == -2
    assert lst(r, q.keys.active) == ["1"]
    assert move_to_wait(q, "nope") == -1
    q.add("waiting", timestamp=NOW)
    assert move_to_wait(q, "2", token="0") == -3
    assert lst(r, q.keys.wait) == ["2"]


def test_answers_the_rate_limit_ttl(r: redis.Redis, redis_url: str, qname: str) -> None:
    """As BullMQ's: the limiter's PTTL, so a worker knows how long to wait."""
    q = new_queue(redis_url, qname)
    add_active(q)
    r.set(q.keys.limiter, 5, px=60_000)
    assert 0 < move_to_wait(q, "1") <= 60_000


def test_a_grouped_job_goes_first_in_its_group(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A grouped job leaves its group's running count and goes back to the
    front of its group: its group's next turn takes it, not the job added
    after it."""
    q = Queue(qname, redis_url)
    q.set_group("a", concurrency=1)
    q.add("a1", {}, group="a")
    q.add("a2", {}, group="a")
    first = move_to_active(q, now=NOW)
    assert first[0][0] == "1"
    assert move_to_active(q, now=NOW, seq=1)[0] == []  # (a's cap: one at a time)
    assert move_to_wait(q, "1") == 0
    assert q.get_counts("waiting", "active") == {"waiting": 2, "active": 0}
    assert move_to_active(q, now=NOW + 1, seq=2)[0][0] == "1"
    assert events(r, q)[-2:][0] == {"event": "waiting", "jobId": "1", "prev": "active"}
