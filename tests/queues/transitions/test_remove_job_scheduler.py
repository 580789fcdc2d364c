"""remove_job_scheduler: the scheduler entry, its hash and its delayed next
iteration go."""

from __future__ import annotations

import redis

from .helpers import NOW, events, lst, new_queue
from .test_add_job_scheduler import upsert


def test_remove_with_delayed_iteration(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The delayed iteration is deleted with `removed {prev=delayed}`; `repeat`
    and `repeat:{id}` are gone; a second removal answers False."""
    q = new_queue(redis_url, qname)
    upsert(q, "s1", every_ms=1000, start_date=NOW + 5000)
    assert q.remove_job_scheduler("s1") is True
    assert not r.exists(
        q.keys.repeat,
        q.keys.scheduler("s1"),
        q.keys.delayed,
        q.keys.job(f"repeat:s1:{NOW + 5000}"),
    )
    assert events(r, q)[-1] == {
        "event": "removed",
        "jobId": f"repeat:s1:{NOW + 5000}",
        "prev": "delayed",
    }
    assert q.remove_job_scheduler("s1") is False


def test_waiting_iteration_is_left(r: redis.Redis, redis_url: str, qname: str) -> None:
    """An iteration already in wait stays to run once, as in BullMQ."""
    q = new_queue(redis_url, qname)
    upsert(q, "s1", every_ms=1000)
    assert q.remove_job_scheduler("s1") is True
    assert lst(r, q.keys.wait) == [f"repeat:s1:{NOW}"]
    assert q.get_job_schedulers() == []
    assert q.get_job_schedulers_count() == 0


def test_read_schedulers(r: redis.Redis, redis_url: str, qname: str) -> None:
    """get_job_schedulers / get_job_scheduler report Node's fields."""
    q = new_queue(redis_url, qname)
    upsert(
        q,
        "a",
        every_ms=1000,
        template={"name": "n", "data": {"x": 1}, "opts": {"attempts": 3}},
    )
    upsert(q, "b", every_ms=1000, start_date=NOW + 9000)
    assert [s.key for s in q.get_job_schedulers()] == ["b", "a"]
    assert [s.key for s in q.get_job_schedulers(asc=True)] == ["a", "b"]
    assert q.get_job_schedulers_count() == 2
    assert [s.key for s in q.get_job_schedulers(1, 1, asc=True)] == ["b"]
    a = q.get_job_scheduler("a")
    assert a.to_dict() == {
        "key": "a",
        "name": "n",
        "next": NOW,
        "iterationCount": 1,
        "every": 1000,
        "offset": NOW % 1000,
        "template": {"data": {"x": 1}, "opts": {"attempts": 3}},
    }
    assert q.get_job_scheduler("zz") is None
