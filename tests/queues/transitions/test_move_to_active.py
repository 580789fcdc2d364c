"""move_to_active (docs/protocol.md §4.5, batched as the worker calls it)."""

from __future__ import annotations

import pytest
import redis

from .helpers import (
    LOCK_MS,
    NOW,
    claimed,
    delayed_score,
    events,
    job_hash,
    lst,
    markers,
    move_to_active,
    new_queue,
    priority_score,
    zset,
)


def test_claims_from_wait_tail(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The oldest job (wait tail) moves to the head of `active`, gets a lock with
    PX lockDuration, processedOn = now, ats 1, and `active {prev=waiting}`."""
    q = new_queue(redis_url, qname)
    for _ in range(3):
        q.add("x", {"k": 1}, timestamp=NOW - 10)
    r.delete(q.keys.events, q.keys.marker)
    reply = move_to_active(q, now=NOW)
    assert reply[1:] == [0, 0]
    [(job_id, token, h)] = claimed(reply)
    assert (job_id, token) == ("1", "w1:0")
    assert h == job_hash(r, q, "1")
    assert h["processedOn"] == str(NOW)
    assert h["ats"] == "1"
    assert "pb" not in h
    assert lst(r, q.keys.active) == ["1"]
    assert lst(r, q.keys.wait) == ["3", "2"]
    assert r.get(q.keys.lock("1")) == "w1:0"
    assert 0 < r.pttl(q.keys.lock("1")) <= LOCK_MS
    assert events(r, q) == [{"event": "active", "jobId": "1", "prev": "waiting"}]
    assert markers(r, q) == {"0": 0.0}


def test_batch_claim_tokens_and_worker_name(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A batch claim locks each job with token:{seq+i}; a worker name becomes `pb`."""
    q = new_queue(redis_url, qname)
    for _ in range(3):
        q.add("x", timestamp=NOW)
    reply = move_to_active(q, count=5, seq=7, name="gpu-1", lock_ms=5000)
    got = claimed(reply)
    assert [(j, t) for j, t, _ in got] == [("1", "w1:7"), ("2", "w1:8"), ("3", "w1:9")]
    assert all(h["pb"] == "gpu-1" for _, _, h in got)
    assert lst(r, q.keys.active) == ["3", "2", "1"]
    assert r.get(q.keys.lock("3")) == "w1:9"
    assert 0 < r.pttl(q.keys.lock("3")) <= 5000
    assert job_hash(r, q, "2")["ats"] == "1"


@pytest.mark.parametrize("group", [None, "g1"])
def test_a_reclaimed_jobs_reply_reads_as_its_hash(
    r: redis.Redis, redis_url: str, qname: str, group: str | None
) -> None:
    """A job claimed before (processedOn, pb, ats set): the reply lists its
    hash as read, then the fields the claim wrote; read as a dict (a later
    pair wins) it is the hash now in Redis, grouped or not."""
    q = new_queue(redis_url, qname)
    q.add("x", timestamp=NOW, **({"group": group} if group else {}))
    r.hset(q.keys.job("1"), mapping={"processedOn": "5", "pb": "old", "ats": "4"})
    [(_, _, h)] = claimed(move_to_active(q, now=NOW, name="gpu-2"))
    assert h == job_hash(r, q, "1")
    assert (h["processedOn"], h["pb"], h["ats"]) == (str(NOW), "gpu-2", "5")


def test_attempts_started_increments(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Each move to active HINCRBYs `ats`."""
    q = new_queue(redis_url, qname)
    q.add("x", timestamp=NOW)
    r.hset(q.keys.job("1"), "ats", 4)
    move_to_active(q)
    assert job_hash(r, q, "1")["ats"] == "5"


def test_wait_drains_before_prioritized(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """`wait` is always taken first; then ZPOPMIN on `prioritized`; `pc` is DELeted
    when a claim finds `prioritized` empty."""
    q = new_queue(redis_url, qname)
    q.add("p", priority=2, timestamp=NOW)
    q.add("p", priority=1, timestamp=NOW)
    q.add("w", timestamp=NOW)
    got = claimed(move_to_active(q, count=3))
    assert [j for j, _, _ in got] == ["3", "2", "1"]
    assert lst(r, q.keys.active) == ["1", "2", "3"]
    assert r.get(q.keys.pc) == "2"
    assert claimed(move_to_active(q)) == []
    assert not r.exists(q.keys.pc)


def test_promotes_due_delayed_jobs(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Delayed jobs with score <= (now+1)*4096-1 are promoted first: LPUSH to wait
    (or prioritized with a fresh counter), `delay` reset to 0, and
    `waiting {prev=delayed}` emitted; later ones stay delayed."""
    q = new_queue(redis_url, qname)
    q.add("a", delay=500, timestamp=NOW - 500)  # due now
    q.add("b", delay=500, priority=4, timestamp=NOW - 500)  # due now, prioritized
    q.add("c", delay=1, timestamp=NOW)  # due now + 1
    r.delete(q.keys.events)
    assert move_to_active(q, now=NOW, count=0) == [[], 0, NOW + 1]
    assert lst(r, q.keys.wait) == ["1"]
    assert zset(r, q.keys.prioritized) == [("2", float(priority_score(4, 1)))]
    assert zset(r, q.keys.delayed) == [("3", float(delayed_score(NOW + 1)))]
    assert job_hash(r, q, "1")["delay"] == "0"
    assert job_hash(r, q, "2")["delay"] == "0"
    assert job_hash(r, q, "3")["delay"] == "1"
    assert events(r, q) == [
        {"event": "waiting", "jobId": "1", "prev": "delayed"},
        {"event": "waiting", "jobId": "2", "prev": "delayed"},
    ]
    assert markers(r, q)["0"] == 0.0


def test_promoted_job_is_claimed_in_the_same_call(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A due delayed job is promoted and claimed by one call."""
    q = new_queue(redis_url, qname)
    q.add("a", delay=100, timestamp=NOW - 100)
    [(job_id, _, h)] = claimed(move_to_active(q, now=NOW))
    assert job_id == "1"
    assert h["delay"] == "0"
    assert not r.exists(q.keys.delayed)


def test_nothing_to_claim_returns_next_delayed_due(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """With no ready job the reply's 3rd element is the earliest delayed due (ms)."""
    q = new_queue(redis_url, qname)
    assert move_to_active(q) == [[], 0, 0]
    q.add("x", delay=700, timestamp=NOW)
    q.add("x", delay=300, timestamp=NOW)
    assert move_to_active(q, now=NOW) == [[], 0, NOW + 300]
    assert not r.exists(q.keys.active)


def test_paused_queue_returns_nothing(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A paused queue answers [0,0,0,0] in BullMQ (here: no jobs, ttl 0, next 0),
    even with delayed jobs pending; due delayed jobs are still promoted, without
    a base marker."""
    q = new_queue(redis_url, qname)
    q.add("w", timestamp=NOW)
    q.add("d", delay=100, timestamp=NOW - 100)
    q.add("later", delay=5000, timestamp=NOW)
    q.pause()
    assert move_to_active(q, now=NOW) == [[], 0, 0]
    assert lst(r, q.keys.wait) == ["2", "1"]
    assert not r.exists(q.keys.active)
    assert "0" not in markers(r, q)


def test_legacy_marker_in_wait_is_skipped(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A legacy "0:" id popped from wait is dropped from active; the next is taken."""
    q = new_queue(redis_url, qname)
    q.add("x", timestamp=NOW)
    r.rpush(q.keys.wait, "0:1000")
    [(job_id, _, _)] = claimed(move_to_active(q))
    assert job_id == "1"
    assert lst(r, q.keys.active) == ["1"]
    assert not r.exists(q.keys.wait)


def test_global_concurrency(r: redis.Redis, redis_url: str, qname: str) -> None:
    """With meta concurrency=2 a batch claims only up to 2 active jobs; at the limit
    the reply is empty and nothing is popped."""
    q = new_queue(redis_url, qname)
    q.set_global_concurrency(2)
    for _ in range(4):
        q.add("x", timestamp=NOW)
    assert [j for j, _, _ in claimed(move_to_active(q, count=5))] == ["1", "2"]
    assert move_to_active(q, count=5) == [[], 0, 0]
    assert lst(r, q.keys.wait) == ["4", "3"]
    assert r.llen(q.keys.active) == 2


def test_global_limit_one_job_while_marker_taken(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Under a global concurrency or rate limit, a call that finds no base
    marker (another worker may be blocked on it) claims one job however many
    are asked for, and re-adds the marker for the next worker."""
    q = new_queue(redis_url, qname)
    q.set_global_concurrency(3)
    for _ in range(4):
        q.add("x", timestamp=NOW)
    for expected in ("1", "2"):
        r.delete(q.keys.marker)
        assert [j for j, _, _ in claimed(move_to_active(q, count=5))] == [expected]
        assert markers(r, q) == {"0": 0.0}
    q.set_global_concurrency(10)
    q.set_global_rate_limit(5, 10_000)
    r.delete(q.keys.marker)
    assert [j for j, _, _ in claimed(move_to_active(q, count=5))] == ["3"]


def test_global_rate_limit(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Meta max/duration: the `limiter` counter is INCRed per claimed job,
    PEXPIREd to duration on the first INCR; at max the reply carries the
    limiter PTTL. (The first call finds no marker: it claims one job.)"""
    q = new_queue(redis_url, qname)
    q.set_global_rate_limit(2, 10_000)
    for _ in range(4):
        q.add("x", timestamp=NOW)
    r.delete(q.keys.marker)
    got = claimed(move_to_active(q, count=5)) + claimed(move_to_active(q, count=5))
    assert [j for j, _, _ in got] == ["1", "2"]
    assert r.get(q.keys.limiter) == "2"
    assert 9_000 < r.pttl(q.keys.limiter) <= 10_000
    # The jobs claimed before the limit hit still wake another worker.
    assert markers(r, q) == {"0": 0.0}
    jobs, ttl, next_delay = move_to_active(q, count=5)
    assert jobs == [] and next_delay == 0
    assert 9_000 < ttl <= 10_000
    assert lst(r, q.keys.wait) == ["4", "3"]


def test_rate_limit_precedence(r: redis.Redis, redis_url: str, qname: str) -> None:
    """max: meta wins over the worker's limiter; duration: the worker's wins."""
    q = new_queue(redis_url, qname)
    r.hset(q.keys.meta, mapping={"max": 1, "duration": 60_000})
    for _ in range(3):
        q.add("x", timestamp=NOW)
    got = claimed(move_to_active(q, count=5, limiter={"max": 5, "duration": 2_000}))
    assert len(got) == 1
    assert r.get(q.keys.limiter) == "1"
    assert 1_000 < r.pttl(q.keys.limiter) <= 2_000


def test_worker_limiter_alone(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Without meta max, the worker's limiter {max, duration} applies."""
    q = new_queue(redis_url, qname)
    for _ in range(3):
        q.add("x", timestamp=NOW)
    limiter = {"max": 2, "duration": 3_000}
    got = claimed(move_to_active(q, count=5, limiter=limiter))
    assert len(got) == 2
    jobs, ttl, _ = move_to_active(q, count=5, limiter=limiter)
    assert jobs == [] and 2_000 < ttl <= 3_000


def test_rate_limit_checked_while_paused(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The limiter answer comes before the paused check, as in BullMQ."""
    q = new_queue(redis_url, qname)
    q.set_global_rate_limit(1, 5_000)
    r.set(q.keys.limiter, 1, px=5_000)
    q.pause()
    jobs, ttl, _ = move_to_active(q)
    assert jobs == [] and ttl > 0


def test_no_limit_without_max(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A limiter key alone (Queue.rateLimit style) is ignored when no max is set."""
    q = new_queue(redis_url, qname)
    r.set(q.keys.limiter, 9007199254740991, px=5_000)
    q.add("x", timestamp=NOW)
    assert len(claimed(move_to_active(q))) == 1
    assert r.get(q.keys.limiter) == "9007199254740991"
