"""move_to_finished (docs/protocol.md §4.7 and the final failure of 4.8)."""

from __future__ import annotations

import redis

from queues import codec

from .helpers import (
    NOW,
    add_active,
    claimed,
    clear_events,
    entry,
    event_names,
    events,
    job_hash,
    lst,
    markers,
    move_to_active,
    move_to_finished,
    new_queue,
    zset,
)

LATER = NOW + 2_000


def test_complete(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Completing: lock DELed, id SREMed from `stalled`, LREM from active, ZADD
    completed with score finishedOn, `returnvalue` JSON, `finishedOn`, `atm`+1,
    `completed {returnvalue, prev=active}` then `drained`."""
    q = new_queue(redis_url, qname)
    add_active(q)
    r.sadd(q.keys.stalled, "1")
    clear_events(r, q)
    reply = move_to_finished(q, [entry("1", value='{"ok":true}')], now=LATER)
    assert reply == [[0], [], 0, 0]
    assert not r.exists(q.keys.lock("1"))
    assert not r.exists(q.keys.stalled)
    assert not r.exists(q.keys.active)
    assert r.type(q.keys.completed) == "zset"
    assert zset(r, q.keys.completed) == [("1", float(LATER))]
    h = job_hash(r, q, "1")
    assert h["returnvalue"] == '{"ok":true}'
    assert h["finishedOn"] == str(LATER)
    assert h["processedOn"] == str(NOW)
    assert h["atm"] == "1"
    assert events(r, q) == [
        {
            "event": "completed",
            "jobId": "1",
            "returnvalue": '{"ok":true}',
            "prev": "active",
        },
        {"event": "drained"},
    ]
    assert r.hget(q.keys.meta, "opts.maxLenEvents") == "10000"


def test_fail_final(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Failing: raw failedReason (not JSON), stacktrace JSON array from the fields,
    `defa` deleted, ZADD failed at finishedOn, `failed {failedReason raw}` then
    `retries-exhausted {attemptsMade}` when atm >= attempts."""
    q = new_queue(redis_url, qname)
    add_active(q)
    r.hset(q.keys.job("1"), "defa", "job stalled more than allowable limit")
    clear_events(r, q)
    trace = codec.dumps(["Error: boom\n  at x"])
    reply = move_to_finished(
        q,
        [
            entry(
                "1",
                "failed",
                "boom",
                attempts=1,
                fields=["failedReason", "boom", "stacktrace", trace],
            )
        ],
        now=LATER,
    )
    assert reply[0] == [0]
    assert zset(r, q.keys.failed) == [("1", float(LATER))]
    h = job_hash(r, q, "1")
    assert h["failedReason"] == "boom"
    assert codec.loads(h["stacktrace"]) == ["Error: boom\n  at x"]
    assert h["finishedOn"] == str(LATER)
    assert h["atm"] == "1"
    assert "defa" not in h
    assert "returnvalue" not in h
    assert events(r, q) == [
        {"event": "failed", "jobId": "1", "failedReason": "boom", "prev": "active"},
        {"event": "retries-exhausted", "jobId": "1", "attemptsMade": "1"},
        {"event": "drained"},
    ]


def test_fail_before_attempts_exhausted(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A final failure at atm < attempts emits `failed`, no `retries-exhausted`."""
    q = new_queue(redis_url, qname)
    add_active(q, attempts=3)
    clear_events(r, q)
    move_to_finished(q, [entry("1", "failed", "fatal", attempts=3)], now=LATER)
    assert event_names(r, q) == ["failed", "drained"]


def test_error_codes(r: redis.Redis, redis_url: str, qname: str) -> None:
    """-1 missing job, -2 no lock, -6 lock of another token, -3 not active,
    -4 pending dependencies, -9 failed children; nothing is finished."""
    q = new_queue(redis_url, qname)
    add_active(q)
    assert move_to_finished(q, [entry("nope")])[0] == [-1]
    assert move_to_finished(q, [entry("1", token="other:0")])[0] == [-6]
    r.sadd(q.keys.job("1") + ":dependencies", q.keys.job("child"))
    assert move_to_finished(q, [entry("1")])[0] == [-4]
    r.delete(q.keys.job("1") + ":dependencies")
    r.zadd(q.keys.job("1") + ":unsuccessful", {q.keys.job("child"): NOW})
    assert move_to_finished(q, [entry("1")])[0] == [-9]
    r.delete(q.keys.job("1") + ":unsuccessful")
    # -4/-9 only guard completion: a parent with pending children may fail.
    r.delete(q.keys.lock("1"))
    assert move_to_finished(q, [entry("1")])[0] == [-2]
    assert lst(r, q.keys.active) == ["1"]
    assert not r.exists(q.keys.completed)
    # Lock held but not in active: the lock is released before the -3.
    r.lrem(q.keys.active, 0, "1")
    r.set(q.keys.lock("1"), "w1:0")
    assert move_to_finished(q, [entry("1")])[0] == [-3]
    assert not r.exists(q.keys.lock("1"))
    assert "finishedOn" not in job_hash(r, q, "1")


def test_batch_codes(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A batch returns one code per entry and finishes the valid ones."""
    q = new_queue(redis_url, qname)
    for _ in range(2):
        q.add("x", timestamp=NOW)
    move_to_active(q, count=2)
    reply = move_to_finished(
        q, [entry("1", token="w1:0"), entry("2", token="bad:1"), entry("3")], now=LATER
    )
    assert reply[0] == [0, -6, -1]
    assert zset(r, q.keys.completed) == [("1", float(LATER))]


def test_remove_on_complete_true(r: redis.Redis, redis_url: str, qname: str) -> None:
    """keep count 0 deletes the job's keys at once; `completed` is still emitted."""
    q = new_queue(redis_url, qname)
    add_active(q)
    r.rpush(q.keys.logs("1"), "line")
    clear_events(r, q)
    move_to_finished(q, [entry("1", value="7", keep={"count": 0})], now=LATER)
    assert not r.exists(q.keys.job("1"), q.keys.logs("1"), q.keys.completed)
    assert events(r, q)[0] == {
        "event": "completed",
        "jobId": "1",
        "returnvalue": "7",
        "prev": "active",
    }


def test_retention_by_count(r: redis.Redis, redis_url: str, qname: str) -> None:
    """keep count n keeps the newest n entries; older ones lose hash and sub-keys."""
    q = new_queue(redis_url, qname)
    for i in range(4):
        add_active(q, now=NOW + i)
        r.rpush(q.keys.logs(str(i + 1)), "l")
        move_to_finished(q, [entry(str(i + 1), keep={"count": 2})], now=NOW + 10 + i)
    assert zset(r, q.keys.completed) == [("3", float(NOW + 12)), ("4", float(NOW + 13))]
    assert not r.exists(
        q.keys.job("1"), q.keys.job("2"), q.keys.logs("1"), q.keys.logs("2")
    )
    assert r.exists(q.keys.job("3"), q.keys.job("4")) == 2


def test_retention_by_age(r: redis.Redis, redis_url: str, qname: str) -> None:
    """keep age (seconds) deletes entries with score <= now - age*1000."""
    q = new_queue(redis_url, qname)
    for job_id, finished in (
        ("old1", NOW - 20_000),
        ("old2", NOW - 10_000),
        ("young", NOW - 9_999),
    ):
        r.hset(q.keys.job(job_id), mapping={"name": "x", "data": "{}"})
        r.zadd(q.keys.completed, {job_id: finished})
    add_active(q)
    move_to_finished(q, [entry("1", keep={"age": 10})], now=NOW)
    assert zset(r, q.keys.completed) == [
        ("young", float(NOW - 9_999)),
        ("1", float(NOW)),
    ]
    assert not r.exists(q.keys.job("old1"), q.keys.job("old2"))


def test_retention_by_age_limit(r: redis.Redis, redis_url: str, qname: str) -> None:
    """At most `limit` old entries are deleted per call, newest first."""
    q = new_queue(redis_url, qname)
    for n in range(3):
        r.hset(q.keys.job(f"o{n}"), "name", "x")
        r.zadd(q.keys.failed, {f"o{n}": NOW - 60_000 + n})
    add_active(q)
    move_to_finished(
        q, [entry("1", "failed", "e", keep={"age": 1, "limit": 2})], now=NOW
    )
    assert [m for m, _ in zset(r, q.keys.failed)] == ["o0", "1"]
    assert r.exists(q.keys.job("o0")) == 1
    assert not r.exists(q.keys.job("o1"), q.keys.job("o2"))


def test_retention_by_age_and_count(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Age and count apply together."""
    q = new_queue(redis_url, qname)
    for n in range(3):
        r.hset(q.keys.job(f"y{n}"), "name", "x")
        r.zadd(q.keys.completed, {f"y{n}": NOW - 100 + n})
    r.hset(q.keys.job("old"), "name", "x")
    r.zadd(q.keys.completed, {"old": NOW - 100_000})
    add_active(q)
    move_to_finished(q, [entry("1", keep={"age": 60, "count": 2})], now=NOW)
    assert [m for m, _ in zset(r, q.keys.completed)] == ["y2", "1"]


def test_fetch_next_claims_the_next_job(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """With fetch, the next job is claimed in the same call; no `drained`."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.add("x", timestamp=NOW)
    clear_events(r, q)
    reply = move_to_finished(q, [entry("1")], now=LATER, fetch=1, seq=1)
    assert reply[0] == [0] and reply[2:] == [0, 0]
    [(job_id, token, h)] = claimed(reply[1:])
    assert (job_id, token, h["processedOn"]) == ("2", "w1:1", str(LATER))
    assert lst(r, q.keys.active) == ["2"]
    assert event_names(r, q) == ["completed", "active"]


def test_fetch_next_with_only_delayed_jobs(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A fetch that finds only delayed jobs returns the next due time and, as
    BullMQ's fetchNextJob, emits no `drained`."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.add("later", delay=5_000, timestamp=NOW)
    clear_events(r, q)
    reply = move_to_finished(q, [entry("1")], now=LATER, fetch=1)
    assert reply == [[0], [], 0, NOW + 5_000]
    assert event_names(r, q) == ["completed"]


def test_fetch_next_on_paused_queue(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A fetch on a paused queue claims nothing and emits no `drained` (BullMQ
    answers the fetch with [0,0,0,0])."""
    q = new_queue(redis_url, qname)
    add_active(q)
    r.hset(q.keys.meta, "paused", 1)
    clear_events(r, q)
    reply = move_to_finished(q, [entry("1")], now=LATER, fetch=1)
    assert reply == [[0], [], 0, 0]
    assert event_names(r, q) == ["completed"]


def test_fetch_next_on_empty_queue_drains(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A fetch that finds nothing at all is followed by `drained`."""
    q = new_queue(redis_url, qname)
    add_active(q)
    clear_events(r, q)
    assert move_to_finished(q, [entry("1")], now=LATER, fetch=1) == [[0], [], 0, 0]
    assert event_names(r, q) == ["completed", "drained"]


def test_no_drained_while_jobs_wait(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Without fetch, `drained` needs wait, active and prioritized all empty."""
    q = new_queue(redis_url, qname)
    add_active(q)
    q.add("p", priority=1, timestamp=NOW)
    clear_events(r, q)
    move_to_finished(q, [entry("1")], now=LATER)
    assert event_names(r, q) == ["completed"]


def test_global_concurrency_frees_a_slot(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """When a maxed queue drops below its concurrency with jobs waiting, the base
    marker is written (Bullpen addition: BullMQ relies on timeouts)."""
    q = new_queue(redis_url, qname)
    q.set_global_concurrency(1)
    add_active(q)
    q.add("x", timestamp=NOW)
    r.delete(q.keys.marker)
    move_to_finished(q, [entry("1")], now=LATER)
    assert markers(r, q) == {"0": 0.0}


def test_global_concurrency_finish_claims_nothing(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Under a global concurrency a finish with fetch claims nothing, so the
    freed slot goes to the worker that waited longest on the marker, not back
    to the one that finished; no `drained` while jobs wait."""
    q = new_queue(redis_url, qname)
    q.set_global_concurrency(2)
    add_active(q)
    q.add("x", timestamp=NOW)
    r.delete(q.keys.marker)
    clear_events(r, q)
    assert move_to_finished(q, [entry("1")], now=LATER, fetch=2) == [[0], [], 0, 0]
    assert lst(r, q.keys.wait) == ["2"] and not r.exists(q.keys.active)
    assert markers(r, q) == {"0": 0.0}
    assert event_names(r, q) == ["completed"]


def test_global_concurrency_finish_claims_when_nobody_waits(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A base marker left untaken means no worker is blocked on it: then the
    finishing call claims the freed slots itself, in one batch."""
    q = new_queue(redis_url, qname)
    q.set_global_concurrency(2)
    add_active(q)
    q.add("x", timestamp=NOW)
    q.add("y", timestamp=NOW)
    assert markers(r, q) == {"0": 0.0}
    reply = move_to_finished(q, [entry("1")], now=LATER, fetch=3, seq=1)
    assert [job_id for job_id, _, _ in claimed(reply[1:])] == ["2", "3"]
    assert lst(r, q.keys.active) == ["3", "2"]


def test_completed_child_releases_parent(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A completed child leaves its parent's `:dependencies`, its returnvalue goes to
    `:processed`, and a parent with no pending child moves from waiting-children
    to the wait tail with `waiting {prev=waiting-children}`."""
    q = new_queue(redis_url, qname)
    parent_key = q.keys.job("parent")
    r.hset(parent_key, mapping={"name": "p", "data": "{}", "priority": 0, "delay": 0})
    r.zadd(q.keys.waiting_children, {"parent": NOW})
    q.add("c", timestamp=NOW)
    r.hset(
        q.keys.job("1"),
        mapping={
            "parentKey": parent_key,
            "parent": codec.dumps({"id": "parent", "queueKey": q.keys.qualified_name}),
        },
    )
    r.sadd(parent_key + ":dependencies", q.keys.job("1"))
    move_to_active(q)
    clear_events(r, q)
    move_to_finished(q, [entry("1", value="42")], now=LATER)
    assert not r.exists(parent_key + ":dependencies", q.keys.waiting_children)
    assert r.hgetall(parent_key + ":processed") == {q.keys.job("1"): "42"}
    assert lst(r, q.keys.wait) == ["parent"]
    assert {
        "event": "waiting",
        "jobId": "parent",
        "prev": "waiting-children",
    } in events(r, q)


def test_retention_releases_parent_softly(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A failed child (no parent flag) deleted by retention leaves the parent's
    dependencies; if it was the last one the parent is released with its
    `waiting` event (docs/protocol.md §4.16: retention deletes are soft)."""
    q = new_queue(redis_url, qname)
    parent_key = q.keys.job("parent")
    r.hset(parent_key, mapping={"name": "p", "data": "{}", "priority": 0, "delay": 0})
    r.zadd(q.keys.waiting_children, {"parent": NOW})
    q.add("c", timestamp=NOW)
    r.hset(
        q.keys.job("1"),
        mapping={
            "parentKey": parent_key,
            "parent": codec.dumps({"id": "parent", "queueKey": q.keys.qualified_name}),
        },
    )
    r.sadd(parent_key + ":dependencies", q.keys.job("1"))
    move_to_active(q)
    clear_events(r, q)
    move_to_finished(q, [entry("1", "failed", "err", keep={"count": 0})], now=LATER)
    assert not r.exists(q.keys.job("1"), parent_key + ":dependencies")
    assert lst(r, q.keys.wait) == ["parent"]
    assert event_names(r, q) == ["waiting", "failed", "retries-exhausted"]
