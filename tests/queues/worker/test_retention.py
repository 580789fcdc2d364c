"""Retention of finished jobs: remove_on_complete / remove_on_fail as a
count, as {"age": s}, and True, set on the job or as worker defaults."""

from __future__ import annotations

import time
from typing import Any

import redis

from queues import Job, Queue
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread


def succeed(job: Job) -> Any:
    return job.name


def fail(job: Job) -> Any:
    raise RuntimeError(f"failed {job.name}")


def one_ms_apart(processor: Any) -> Any:
    """`processor` taking over a millisecond, so jobs run one at a time finish
    at distinct scores: a count keeps the highest scores, and jobs that tie
    on a millisecond are ranked by id as text ("10" before "9"), as in BullMQ."""

    def slow(job: Job) -> Any:
        time.sleep(0.002)
        return processor(job)

    return slow


def _ids(r: redis.Redis, key: str) -> list[str]:
    """Ids in a finished set, numerically (jobs finishing in one ms tie on score)."""
    return sorted(r.zrange(key, 0, -1), key=int)


def _run(
    redis_url: str, q: Queue, processor: Any, n: int, **worker_options: Any
) -> None:
    """Process until `n` jobs have finished (counted by events: a job removed
    at once never shows in completed/failed)."""

    def finished() -> bool:
        return (
            sum(
                1
                for _, f in q.client.xrange(q.keys.events)
                if f.get("event") in ("completed", "failed")
            )
            >= n
        )

    with worker_thread(q.name, processor, redis_url, concurrency=1, **worker_options):
        wait_until(finished, 10, what=f"{n} finished jobs")


def _exists(r: redis.Redis, q: Queue, job_ids: list[str]) -> list[bool]:
    return [bool(r.exists(q.keys.job(i))) for i in job_ids]


def test_remove_on_complete_count(redis_url: str, q: Queue, r: redis.Redis) -> None:
    """A count keeps the newest N completed jobs and deletes the others' hashes."""
    jobs = q.add_bulk(
        [{"name": f"j{i}", "opts": {"remove_on_complete": 3}} for i in range(10)]
    )
    ids = [j.id for j in jobs]
    _run(redis_url, q, one_ms_apart(succeed), 10)
    assert _ids(r, q.keys.completed) == ids[-3:]
    assert _exists(r, q, ids) == [False] * 7 + [True] * 3
    assert not r.exists(q.keys.logs(ids[0]))


def test_remove_on_fail_count(redis_url: str, q: Queue, r: redis.Redis) -> None:
    """A count keeps the newest N failed jobs."""
    jobs = q.add_bulk(
        [{"name": f"j{i}", "opts": {"remove_on_fail": 2}} for i in range(6)]
    )
    ids = [j.id for j in jobs]
    _run(redis_url, q, one_ms_apart(fail), 6)
    assert _ids(r, q.keys.failed) == ids[-2:]
    assert _exists(r, q, ids) == [False] * 4 + [True] * 2
    assert q.get_job(ids[-1]).failed_reason == "failed j5"


def test_remove_on_complete_and_fail_true(
    redis_url: str, q: Queue, r: redis.Redis
) -> None:
    """True deletes the job as soon as it finishes; it never enters the set."""
    ok = q.add("ok", None, remove_on_complete=True)
    bad = q.add("bad", None, remove_on_fail=True)
    kept = q.add("kept", None)

    def processor(job: Job) -> Any:
        job.log("a line")
        if job.name == "bad":
            raise RuntimeError("no")

    _run(redis_url, q, processor, 3)
    assert _exists(r, q, [ok.id, bad.id, kept.id]) == [False, False, True]
    assert not r.exists(q.keys.logs(ok.id)) and not r.exists(q.keys.logs(bad.id))
    assert _ids(r, q.keys.completed) == [kept.id]
    assert _ids(r, q.keys.failed) == []
    assert q.get_counts("active", "waiting") == {"active": 0, "waiting": 0}


def test_remove_by_age(redis_url: str, q: Queue, r: redis.Redis) -> None:
    """{"age": s} deletes jobs that finished more than s seconds before a
    later job of the same set finishes."""
    old_ok = [q.add("old", None, remove_on_complete={"age": 1}).id for _ in range(3)]
    old_bad = [q.add("old", None, remove_on_fail={"age": 1}).id for _ in range(2)]

    def processor(job: Job) -> Any:
        if job.id in old_bad or job.name == "new-bad":
            raise RuntimeError("no")

    _run(redis_url, q, processor, 5)
    assert _ids(r, q.keys.completed) == old_ok and _ids(r, q.keys.failed) == old_bad
    time.sleep(1.1)
    new_ok = q.add("new", None, remove_on_complete={"age": 1}).id
    new_bad = q.add("new-bad", None, remove_on_fail={"age": 1}).id
    _run(redis_url, q, processor, 7)
    assert _ids(r, q.keys.completed) == [new_ok]
    assert _ids(r, q.keys.failed) == [new_bad]
    assert _exists(r, q, old_ok + old_bad) == [False] * 5
    assert _exists(r, q, [new_ok, new_bad]) == [True, True]


def test_age_and_count_together(redis_url: str, q: Queue, r: redis.Redis) -> None:
    """{"count": n, "age": s}: the count applies to recent jobs too."""
    ids = [
        j.id
        for j in q.add_bulk(
            [
                {"name": "j", "opts": {"remove_on_complete": {"count": 2, "age": 3600}}}
                for _ in range(5)
            ]
        )
    ]
    _run(redis_url, q, succeed, 5)
    assert _ids(r, q.keys.completed) == ids[-2:]


def test_worker_defaults(redis_url: str, q: Queue, r: redis.Redis) -> None:
    """The worker's remove_on_complete / remove_on_fail apply to jobs without
    their own; a job's own setting wins."""
    plain_ok = [q.add("ok", None).id for _ in range(4)]
    own_ok = q.add("ok", None, remove_on_complete=True).id
    plain_bad = [q.add("bad", None).id for _ in range(3)]
    own_bad = q.add("bad", None, remove_on_fail=5).id

    def processor(job: Job) -> Any:
        if job.name == "bad":
            raise RuntimeError("no")

    _run(redis_url, q, processor, 9, remove_on_complete=2, remove_on_fail=True)
    assert _ids(r, q.keys.completed) == plain_ok[-2:]
    assert not r.exists(q.keys.job(own_ok))
    # the failed ones of the default were deleted at once; own_bad (count 5) stays
    assert _ids(r, q.keys.failed) == [own_bad]
    assert _exists(r, q, plain_bad) == [False] * 3


def test_worker_default_age(redis_url: str, q: Queue, r: redis.Redis) -> None:
    """A worker default given as {"age": s}."""
    first = q.add("a", None).id
    _run(redis_url, q, succeed, 1, remove_on_complete={"age": 1})
    time.sleep(1.1)
    second = q.add("b", None).id
    _run(redis_url, q, succeed, 2, remove_on_complete={"age": 1})
    assert _ids(r, q.keys.completed) == [second]
    assert _exists(r, q, [first, second]) == [False, True]
