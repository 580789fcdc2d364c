"""update_data (Job.update_data)."""

from __future__ import annotations

import pytest
import redis

from queues.exceptions import JobNotFound

from .helpers import NOW, clear_events, job_hash, new_queue


def test_data_is_replaced(r: redis.Redis, redis_url: str, qname: str) -> None:
    """`data` is replaced by compact JSON; other fields are untouched, no event."""
    q = new_queue(redis_url, qname)
    job = q.add("x", {"a": 1}, timestamp=NOW)
    before = job_hash(r, q, "1")
    clear_events(r, q)
    job.update_data({"b": [1, "two"]})
    after = job_hash(r, q, "1")
    assert after["data"] == '{"b":[1,"two"]}'
    assert {k: v for k, v in after.items() if k != "data"} == {
        k: v for k, v in before.items() if k != "data"
    }
    assert not r.exists(q.keys.events)
    assert q.get_job("1").data == {"b": [1, "two"]}


def test_missing_job(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A missing job gives -1 (JobNotFound) and no hash is created."""
    q = new_queue(redis_url, qname)
    job = q.add("x", timestamp=NOW)
    r.delete(q.keys.job("1"))
    with pytest.raises(JobNotFound):
        job.update_data({"x": 1})
    assert not r.exists(q.keys.job("1"))
