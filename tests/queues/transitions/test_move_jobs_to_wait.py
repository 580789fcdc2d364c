"""move_jobs_to_wait (docs/protocol.md §4.12 bulk): Queue.retry_jobs and
Queue.promote_jobs."""

from __future__ import annotations

import redis

from queues.flow import add_flows
from queues.queue import Queue
from queues.state import parse_state

from .helpers import (
    NOW,
    claimed,
    clear_events,
    delayed_score,
    entry,
    events,
    job_hash,
    lst,
    markers,
    move_to_active,
    move_to_finished,
    new_queue,
    write_job,
    zset,
)


def _finished(
    r: redis.Redis, q: Queue, state: str, job_id: str, finished_on: int
) -> None:
    field = "failedReason" if state == "failed" else "returnvalue"
    write_job(
        r,
        q,
        job_id,
        processedOn=finished_on - 1,
        finishedOn=finished_on,
        atm=1,
        **{field: "x"},
    )
    r.zadd(q.keys.state(parse_state(state)), {job_id: finished_on})


def test_retry_failed_jobs(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Failed jobs finished at or before the timestamp are LPUSHed to wait in score
    order, lose finishedOn/processedOn/failedReason, each emits `waiting
    {prev=failed}`, and the base marker is set; later ones stay failed."""
    q = new_queue(redis_url, qname)
    for n in range(3):
        _finished(r, q, "failed", f"f{n}", NOW + n)
    _finished(r, q, "failed", "late", NOW + 100)
    q.retry_jobs("failed", timestamp=NOW + 2)
    assert lst(r, q.keys.wait) == ["f2", "f1", "f0"]
    assert zset(r, q.keys.failed) == [("late", float(NOW + 100))]
    h = job_hash(r, q, "f0")
    assert not {"finishedOn", "processedOn", "failedReason"} & set(h)
    assert h["atm"] == "1"
    assert events(r, q) == [
        {"event": "waiting", "jobId": f"f{n}", "prev": "failed"} for n in range(3)
    ]
    assert markers(r, q) == {"0": 0.0}
    assert r.hget(q.keys.meta, "opts.maxLenEvents") == "10000"


def test_retry_completed_in_batches(r: redis.Redis, redis_url: str, qname: str) -> None:
    """The client calls again while a full batch was moved, until all are moved."""
    q = new_queue(redis_url, qname)
    for n in range(5):
        _finished(r, q, "completed", f"c{n}", NOW + n)
    q.retry_jobs("completed", count=2, timestamp=NOW + 10)
    assert lst(r, q.keys.wait) == ["c4", "c3", "c2", "c1", "c0"]
    assert not r.exists(q.keys.completed)
    assert "returnvalue" not in job_hash(r, q, "c3")
    assert {e["prev"] for e in events(r, q)} == {"completed"}


def test_paused_queue_gets_no_marker(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """While paused the jobs go to wait without a marker."""
    q = new_queue(redis_url, qname)
    _finished(r, q, "failed", "f", NOW)
    q.pause()
    q.retry_jobs("failed", timestamp=NOW)
    assert lst(r, q.keys.wait) == ["f"]
    assert not r.exists(q.keys.marker)


def test_promote_jobs(r: redis.Redis, redis_url: str, qname: str) -> None:
    """promote_jobs LPUSHes every delayed job to wait, regardless of priority, and
    does not reset `delay`; each emits `waiting {prev=delayed}`."""
    q = new_queue(redis_url, qname)
    q.add("a", delay=1_000, timestamp=NOW)
    q.add("b", delay=500, priority=3, timestamp=NOW)
    clear_events(r, q)
    q.promote_jobs()
    assert lst(r, q.keys.wait) == ["1", "2"]
    assert not r.exists(q.keys.delayed, q.keys.prioritized)
    assert job_hash(r, q, "1")["delay"] == "1000"
    assert events(r, q) == [
        {"event": "waiting", "jobId": "2", "prev": "delayed"},
        {"event": "waiting", "jobId": "1", "prev": "delayed"},
    ]
    assert markers(r, q)["0"] == 0.0


def test_nothing_to_move(r: redis.Redis, redis_url: str, qname: str) -> None:
    """With nothing eligible no key is written."""
    q = new_queue(redis_url, qname)
    q.add("d", delay=10, timestamp=NOW)
    r.delete(q.keys.marker, q.keys.events)
    q.retry_jobs("failed")
    assert zset(r, q.keys.delayed) == [("1", float(delayed_score(NOW + 10)))]
    assert not r.exists(q.keys.wait, q.keys.marker, q.keys.events)


def _finished_children(r: redis.Redis, q: Queue) -> None:
    """Parent `p` whose children `ok` completed and `bad` (idof) failed, so the
    parent left waiting-children for wait."""
    q.drive(
        add_flows(
            [
                {
                    "name": "p",
                    "queue_name": q.name,
                    "opts": {"job_id": "p"},
                    "children": [
                        {"name": "ok", "queue_name": q.name, "opts": {"job_id": "ok"}},
                        {
                            "name": "bad",
                            "queue_name": q.name,
                            "opts": {
                                "job_id": "bad",
                                "ignore_dependency_on_failure": True,
                            },
                        },
                    ],
                }
            ],
            lambda name, prefix: q,
            "bull",
            NOW,
        )
    )
    ids = [i for i, _, _ in claimed(move_to_active(q, count=2))]
    finish = {"ok": entry("ok", value='"v"'), "bad": entry("bad", "failed", "e")}
    move_to_finished(
        q, [dict(finish[i], token=f"w1:{n}") for n, i in enumerate(ids)], now=NOW + 1
    )
    assert lst(r, q.keys.wait) == ["p"]


def test_retried_children_are_pending_dependencies_again(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Bulk retry of failed (then completed) flow children moves each back into
    its parent's pending dependencies, out of the parent's ignored failures and
    processed values (BullMQ 6.7.0 moveJobsToWait); the parent, already past
    waiting-children, stays in wait."""
    q = new_queue(redis_url, qname)
    _finished_children(r, q)
    p = q.keys.job("p")
    assert r.hgetall(p + ":failed") == {q.keys.job("bad"): "e"}
    q.retry_jobs("failed", timestamp=NOW + 10)
    assert r.smembers(p + ":dependencies") == {q.keys.job("bad")}
    assert not r.exists(p + ":failed")
    assert q.get_job("p").get_dependencies()["ignored"] == {}
    q.retry_jobs("completed", timestamp=NOW + 10)
    assert r.smembers(p + ":dependencies") == {q.keys.job("bad"), q.keys.job("ok")}
    assert not r.exists(p + ":processed")
    assert lst(r, q.keys.wait) == ["ok", "bad", "p"]
