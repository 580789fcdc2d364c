"""update_progress (docs/protocol.md §4.10): Job.update_progress."""

from __future__ import annotations

import pytest
import redis

from queues.exceptions import JobNotFound

from .helpers import NOW, clear_events, events, job_hash, new_queue


def test_number_progress(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Progress is stored as JSON in `progress` and emitted as `progress {data}`."""
    q = new_queue(redis_url, qname)
    job = q.add("x", timestamp=NOW)
    clear_events(r, q)
    job.update_progress(42)
    assert job_hash(r, q, "1")["progress"] == "42"
    assert events(r, q) == [{"event": "progress", "jobId": "1", "data": "42"}]
    assert q.get_job("1").progress == 42


def test_object_progress(r: redis.Redis, redis_url: str, qname: str) -> None:
    """An object progress is stored as compact JSON and replaces the previous value."""
    q = new_queue(redis_url, qname)
    job = q.add("x", timestamp=NOW)
    job.update_progress(10)
    job.update_progress({"step": "b", "pct": 50})
    assert job_hash(r, q, "1")["progress"] == '{"step":"b","pct":50}'
    assert events(r, q)[-1]["data"] == '{"step":"b","pct":50}'


def test_missing_job(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A missing job gives -1 (JobNotFound) and no event or hash is created."""
    q = new_queue(redis_url, qname)
    job = q.add("x", timestamp=NOW)
    r.delete(q.keys.job("1"))
    clear_events(r, q)
    with pytest.raises(JobNotFound):
        job.update_progress(1)
    assert not r.exists(q.keys.job("1"), q.keys.events)
