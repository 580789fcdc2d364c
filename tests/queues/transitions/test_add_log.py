"""add_log (docs/protocol.md §4.11): Job.log."""

from __future__ import annotations

import pytest
import redis

from queues.exceptions import JobNotFound

from .helpers import NOW, clear_events, lst, new_queue


def test_lines_are_appended(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Lines are RPUSHed to `{id}:logs`; the reply is the count; no event."""
    q = new_queue(redis_url, qname)
    job = q.add("x", timestamp=NOW)
    clear_events(r, q)
    assert job.log("one") == 1
    assert job.log("two") == 2
    assert r.type(q.keys.logs("1")) == "list"
    assert lst(r, q.keys.logs("1")) == ["one", "two"]
    assert not r.exists(q.keys.events)
    assert q.get_job_logs("1") == (["one", "two"], 2)


def test_keep_logs_trims(r: redis.Redis, redis_url: str, qname: str) -> None:
    """With keep_logs n only the last n lines stay; the reply is min(n, count).
    This holds for the Job returned by add as for one read back."""
    q = new_queue(redis_url, qname)
    job = q.add("x", timestamp=NOW, keep_logs=2)
    assert [job.log(s) for s in ("a", "b", "c")] == [1, 2, 2]
    assert lst(r, q.keys.logs("1")) == ["b", "c"]
    assert q.get_job("1").log("d") == 2
    assert lst(r, q.keys.logs("1")) == ["c", "d"]


def test_missing_job(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A missing job gives -1 (JobNotFound) and no log list is created."""
    q = new_queue(redis_url, qname)
    job = q.add("x", timestamp=NOW)
    r.delete(q.keys.job("1"))
    with pytest.raises(JobNotFound):
        job.log("line")
    assert not r.exists(q.keys.logs("1"))
