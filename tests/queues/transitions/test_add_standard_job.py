"""add_standard_job (docs/protocol.md §4.1): Queue.add without delay or priority."""

from __future__ import annotations

import json

import redis

from queues import codec

from .helpers import NOW, event_names, events, job_hash, lst, markers, new_queue


def test_job_hash_fields(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The hash holds exactly name, data, opts (JSON), timestamp, delay, priority."""
    q = new_queue(redis_url, qname)
    job = q.add(
        "email",
        {"to": "a@b.c", "n": [1, 2]},
        timestamp=NOW,
        attempts=3,
        keep_logs=5,
        fail_parent_on_failure=True,
    )
    assert job.id == "1"
    assert r.type(q.keys.job("1")) == "hash"
    h = job_hash(r, q, "1")
    assert set(h) == {"name", "data", "opts", "timestamp", "delay", "priority"}
    assert h["name"] == "email"
    assert h["data"] == '{"to":"a@b.c","n":[1,2]}'
    assert h["timestamp"] == str(NOW)
    assert h["delay"] == "0"
    assert h["priority"] == "0"
    assert json.loads(h["opts"]) == {
        "attempts": 3,
        "delay": 0,
        "kl": 5,
        "fpof": True,
        "timestamp": NOW,
    }


def test_data_none_is_stored_as_empty_object(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A job added without data stores `{}`, like Node's JSON.stringify(data ?? {})."""
    q = new_queue(redis_url, qname)
    q.add("x", timestamp=NOW)
    assert job_hash(r, q, "1")["data"] == "{}"


def test_default_opts_match_bullmq(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Default opts are {"attempts": 0, "delay": 0}, as Python BullMQ writes them."""
    q = new_queue(redis_url, qname)
    q.add("x")
    assert codec.loads(job_hash(r, q, "1")["opts"]) == {"attempts": 0, "delay": 0}


def test_fifo_adds_go_to_wait_head(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Adds LPUSH onto the head of `wait`, so the oldest job sits at the tail."""
    q = new_queue(redis_url, qname)
    ids = [q.add("x", timestamp=NOW).id for _ in range(3)]
    assert ids == ["1", "2", "3"]
    assert r.type(q.keys.wait) == "list"
    assert lst(r, q.keys.wait) == ["3", "2", "1"]
    assert r.get(q.keys.id) == "3"


def test_lifo_add_goes_to_wait_tail(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A lifo add RPUSHes onto the tail, so it runs next."""
    q = new_queue(redis_url, qname)
    q.add("x", timestamp=NOW)
    q.add("x", timestamp=NOW, lifo=True)
    q.add("x", timestamp=NOW)
    assert lst(r, q.keys.wait) == ["3", "1", "2"]
    assert codec.loads(job_hash(r, q, "2")["opts"])["lifo"] is True


def test_base_marker_and_events(r: redis.Redis, redis_url: str, qname: str) -> None:
    """An add writes marker "0" with score 0 and emits `added {jobId,name}` then
    `waiting {jobId}` (no prev); meta gets opts.maxLenEvents = 10000."""
    q = new_queue(redis_url, qname)
    q.add("email", timestamp=NOW)
    assert r.type(q.keys.marker) == "zset"
    assert markers(r, q) == {"0": 0.0}
    assert r.type(q.keys.events) == "stream"
    assert events(r, q) == [
        {"event": "added", "jobId": "1", "name": "email"},
        {"event": "waiting", "jobId": "1"},
    ]
    assert r.hgetall(q.keys.meta) == {"opts.maxLenEvents": "10000"}


def test_existing_max_len_events_is_kept(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A meta opts.maxLenEvents written by another client is not overwritten."""
    q = new_queue(redis_url, qname)
    r.hset(q.keys.meta, "opts.maxLenEvents", 500)
    q.add("x", timestamp=NOW)
    assert r.hget(q.keys.meta, "opts.maxLenEvents") == "500"


def test_paused_queue_gets_no_marker(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """While meta `paused` exists the job still goes to `wait`, without a marker."""
    q = new_queue(redis_url, qname)
    r.hset(q.keys.meta, "paused", 1)
    q.add("x", timestamp=NOW)
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.paused)
    assert not r.exists(q.keys.marker)


def test_maxed_queue_gets_no_marker(r: redis.Redis, redis_url: str, qname: str) -> None:
    """At global concurrency (LLEN active >= meta concurrency) no marker is written."""
    q = new_queue(redis_url, qname)
    q.set_global_concurrency(1)
    r.lpush(q.keys.active, "other")
    q.add("x", timestamp=NOW)
    assert lst(r, q.keys.wait) == ["1"]
    assert not r.exists(q.keys.marker)
    r.delete(q.keys.active)
    q.add("x", timestamp=NOW)
    assert markers(r, q) == {"0": 0.0}


def test_duplicate_custom_id(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A custom id that exists is a no-op that INCRs `id`, emits `duplicated` and
    returns the existing id; the stored job is unchanged."""
    q = new_queue(redis_url, qname)
    first = q.add("x", {"v": 1}, job_id="order-7", timestamp=NOW)
    assert first.id == "order-7"
    assert codec.loads(job_hash(r, q, "order-7")["opts"])["jobId"] == "order-7"
    before = job_hash(r, q, "order-7")
    second = q.add("y", {"v": 2}, job_id="order-7", timestamp=NOW + 5)
    assert second.id == "order-7"
    assert job_hash(r, q, "order-7") == before
    assert lst(r, q.keys.wait) == ["order-7"]
    assert r.get(q.keys.id) == "2"
    assert event_names(r, q) == ["added", "waiting", "duplicated"]
    assert events(r, q)[-1] == {"event": "duplicated", "jobId": "order-7"}


def test_counter_advances_on_custom_ids(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """`id` is INCRed on every add: an automatic id after a custom one skips one."""
    q = new_queue(redis_url, qname)
    q.add("x", job_id="custom", timestamp=NOW)
    assert q.add("x", timestamp=NOW).id == "2"


def test_add_bulk_pipelines_the_same_script(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """add_bulk stores every job as single adds would, in order."""
    q = new_queue(redis_url, qname)
    jobs = q.add_bulk(
        [{"name": f"n{i}", "data": i, "opts": {"timestamp": NOW}} for i in range(3)]
    )
    assert [j.id for j in jobs] == ["1", "2", "3"]
    assert lst(r, q.keys.wait) == ["3", "2", "1"]
    assert job_hash(r, q, "2")["data"] == "1"
    assert job_hash(r, q, "3")["name"] == "n2"
