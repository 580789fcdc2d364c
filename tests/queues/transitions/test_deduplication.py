"""Deduplication in the add scripts (docs/protocol.md §4.22, includes/dedup.lua) and
its clean-up in move_to_finished (4.7 step 8) and remove_job."""

from __future__ import annotations

import redis

from queues import codec

from .helpers import (
    NOW,
    add_active,
    clear_events,
    entry,
    events,
    job_hash,
    lst,
    move_to_finished,
    new_queue,
    zset,
)


def test_simple_mode(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Without ttl the key `de:{id}` holds the owner's id with no expiry; a
    second add returns the owner's id, stores nothing, still INCRs `id`, and
    emits `deduplicated {jobId=owner, deduplicationId, deduplicatedJobId=new}`.
    The owner's hash has `deid` and opts.de."""
    q = new_queue(redis_url, qname)
    first = q.add("x", {}, deduplication={"id": "d1"}, timestamp=NOW)
    clear_events(r, q)
    second = q.add("x", {}, deduplication={"id": "d1"}, timestamp=NOW)
    assert (first.id, second.id) == ("1", "1")
    assert r.get(q.keys.dedup("d1")) == "1"
    assert r.pttl(q.keys.dedup("d1")) == -1
    assert r.get(q.keys.id) == "2"
    assert not r.exists(q.keys.job("2"))
    assert lst(r, q.keys.wait) == ["1"]
    h = job_hash(r, q, "1")
    assert h["deid"] == "d1"
    assert codec.loads(h["opts"])["de"] == {"id": "d1"}
    assert events(r, q) == [
        {
            "event": "deduplicated",
            "jobId": "1",
            "deduplicationId": "d1",
            "deduplicatedJobId": "2",
        }
    ]


def test_throttle_mode(r: redis.Redis, redis_url: str, qname: str) -> None:
    """With ttl the key expires after ttl ms; after it is gone a new job is
    stored; `extend` restarts the window on each deduplicated add."""
    q = new_queue(redis_url, qname)
    q.add("x", {}, deduplication={"id": "d", "ttl": 5000})
    assert 4000 < r.pttl(q.keys.dedup("d")) <= 5000
    r.delete(q.keys.dedup("d"))
    assert q.add("x", {}, deduplication={"id": "d", "ttl": 5000}).id == "2"
    q.add("y", {}, deduplication={"id": "e", "ttl": 5000, "extend": True})
    r.pexpire(q.keys.dedup("e"), 100)
    assert (
        q.add("y", {}, deduplication={"id": "e", "ttl": 5000, "extend": True}).id == "3"
    )
    assert r.pttl(q.keys.dedup("e")) > 4000


def test_replace_a_delayed_owner(r: redis.Redis, redis_url: str, qname: str) -> None:
    """replace (debounce): an owner still delayed is deleted (`removed
    {prev=delayed}`, `deduplicated {jobId=new, deduplicatedJobId=old}`) and
    the new job owns the key, keeping the window's TTL."""
    q = new_queue(redis_url, qname)
    de = {"id": "d", "ttl": 10_000, "replace": True}
    q.add("x", {"v": 1}, delay=1000, deduplication=de, timestamp=NOW)
    clear_events(r, q)
    new = q.add("x", {"v": 2}, delay=1000, deduplication=de, timestamp=NOW)
    assert new.id == "2"
    assert not r.exists(q.keys.job("1"))
    assert zset(r, q.keys.delayed) == [("2", float((NOW + 1000) * 4096))]
    assert r.get(q.keys.dedup("d")) == "2"
    assert r.pttl(q.keys.dedup("d")) > 9000
    assert [e["event"] for e in events(r, q)][:3] == [
        "removed",
        "deduplicated",
        "added",
    ]
    assert events(r, q)[1] == {
        "event": "deduplicated",
        "jobId": "2",
        "deduplicationId": "d",
        "deduplicatedJobId": "1",
    }


def test_replace_an_owner_not_delayed(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """replace with an owner that is waiting or running: the add is dropped."""
    q = new_queue(redis_url, qname)
    de = {"id": "d", "replace": True}
    q.add("x", {}, deduplication=de)
    assert q.add("x", {}, deduplication=de).id == "1"
    assert lst(r, q.keys.wait) == ["1"]


def test_finishing_the_owner_frees_the_key(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A key without TTL is deleted when its owner finishes; a TTL key stays
    until it expires."""
    q = new_queue(redis_url, qname)
    add_active(q, deduplication={"id": "d"})
    move_to_finished(q, [entry("1")])
    assert not r.exists(q.keys.dedup("d"))
    q2 = new_queue(redis_url, qname + "b")
    add_active(q2, deduplication={"id": "d", "ttl": 60_000})
    move_to_finished(q2, [entry("1")])
    assert r.get(q2.keys.dedup("d")) == "1"


def test_keep_last_if_active(r: redis.Redis, redis_url: str, qname: str) -> None:
    """keepLastIfActive: adds while the owner is active are kept (the newest)
    in `dn:{id}` (name, data, opts, jid) and the key loses its TTL; when the
    owner finishes that job is created with its jid, owns the key and waits."""
    q = new_queue(redis_url, qname)
    de = {"id": "d", "ttl": 5000, "keep_last_if_active": True}
    add_active(q, deduplication=de)
    assert q.add("x", {"v": 2}, deduplication=de).id == "1"
    assert q.add("x", {"v": 3}, deduplication=de).id == "1"
    nxt = r.hgetall(q.keys.dedup_next("d"))
    assert (nxt["name"], nxt["data"], nxt["jid"]) == ("x", '{"v":3}', "3")
    assert codec.loads(nxt["opts"])["de"] == {
        "id": "d",
        "ttl": 5000,
        "keepLastIfActive": True,
    }
    assert r.pttl(q.keys.dedup("d")) == -1
    clear_events(r, q)
    move_to_finished(q, [entry("1")])
    assert not r.exists(q.keys.dedup_next("d"))
    assert r.get(q.keys.dedup("d")) == "3"
    assert lst(r, q.keys.wait) == ["3"]
    assert job_hash(r, q, "3")["data"] == '{"v":3}'
    assert job_hash(r, q, "3")["deid"] == "d"
    assert r.get(q.keys.id) == "4"
    assert [e["event"] for e in events(r, q)] == ["added", "waiting", "completed"]


def test_stale_key_is_recovered(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A key without expiry whose owner hash is gone starts a new window."""
    q = new_queue(redis_url, qname)
    r.set(q.keys.dedup("d"), "ghost")
    assert q.add("x", {}, deduplication={"id": "d"}).id == "1"
    assert r.get(q.keys.dedup("d")) == "1"


def test_remove_clears_key_and_next(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Removing the owner deletes its dedup key and any stored next job."""
    q = new_queue(redis_url, qname)
    q.add("x", {}, deduplication={"id": "d"})
    r.hset(q.keys.dedup_next("d"), "name", "x")
    assert q.remove_job("1") is True
    assert not r.exists(q.keys.dedup("d"), q.keys.dedup_next("d"))


def test_reschedule_a_delayed_owner(r: redis.Redis, redis_url: str, qname: str) -> None:
    """reschedule: a deduplicated add pushes a still-delayed owner back to its own
    timestamp + delay (new score, hash `delay`, `delayed` event), keeping the
    owner's id and data."""
    q = new_queue(redis_url, qname)
    de = {"id": "d", "reschedule": True}
    q.add("x", {"v": 1}, delay=1000, deduplication=de, timestamp=NOW)
    clear_events(r, q)
    later = NOW + 500
    assert q.add("x", {"v": 2}, delay=3000, deduplication=de, timestamp=later).id == "1"
    assert zset(r, q.keys.delayed) == [("1", float((later + 3000) * 4096))]
    assert job_hash(r, q, "1")["delay"] == "3000"
    assert job_hash(r, q, "1")["data"] == '{"v":1}'
    assert [e["event"] for e in events(r, q)] == ["deduplicated", "delayed"]
    assert events(r, q)[1]["delay"] == str(later + 3000)
