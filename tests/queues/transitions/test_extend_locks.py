"""extend_locks (docs/protocol.md §4.6, batched form)."""

from __future__ import annotations

import redis

from .helpers import extend_locks, new_queue


def test_renews_matching_locks(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A lock holding the token is SET again with PX duration and the id leaves
    `stalled`; the reply is empty when every lock was renewed."""
    q = new_queue(redis_url, qname)
    r.set(q.keys.lock("1"), "w:0", px=1_000)
    r.set(q.keys.lock("2"), "w:1", px=1_000)
    r.sadd(q.keys.stalled, "1", "2", "9")
    assert extend_locks(q, ["1", "2"], ["w:0", "w:1"], lock_ms=60_000) == []
    assert r.get(q.keys.lock("1")) == "w:0"
    assert r.get(q.keys.lock("2")) == "w:1"
    assert 59_000 < r.pttl(q.keys.lock("1")) <= 60_000
    assert 59_000 < r.pttl(q.keys.lock("2")) <= 60_000
    assert r.smembers(q.keys.stalled) == {"9"}


def test_lost_locks_are_reported(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A lock held by another token, or gone, is left alone, the id stays in
    `stalled`, and the id is returned."""
    q = new_queue(redis_url, qname)
    r.set(q.keys.lock("1"), "other:5", px=1_000)
    r.set(q.keys.lock("3"), "w:2", px=1_000)
    r.sadd(q.keys.stalled, "1", "2", "3")
    assert extend_locks(q, ["1", "2", "3"], ["w:0", "w:1", "w:2"]) == ["1", "2"]
    assert r.get(q.keys.lock("1")) == "other:5"
    assert r.pttl(q.keys.lock("1")) <= 1_000
    assert not r.exists(q.keys.lock("2"))
    assert r.smembers(q.keys.stalled) == {"1", "2"}
