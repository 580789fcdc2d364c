"""get_job_hashes (a read for display): Queue.get_jobs / get_job with
`max_value_bytes` leave out values over the cap and report their lengths."""

from __future__ import annotations

import asyncio

import redis

from queues import AsyncQueue, JobState, Queue

from .helpers import new_queue

BIG = 5_000_000


def test_long_values_are_left_out_with_their_byte_lengths(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    q = new_queue(redis_url, qname)
    small = q.add("small", {"prompt": "a cat"}).id
    big = q.add("big", {"blob": "x" * BIG, "tag": "é"}).id
    r.hset(q.keys.job(big), "returnvalue", "y" * 2000)
    jobs = {j.id: j for j in q.get_jobs("waiting", max_value_bytes=1024)}

    assert jobs[small].data == {"prompt": "a cat"} and jobs[small].left_out == {}
    b = jobs[big]
    assert b.data is None and b.returnvalue is None
    full = len(r.hget(q.keys.job(big), "data").encode())
    assert b.left_out == {"data": full, "returnvalue": 2000}
    assert b.malformed is None  # left out on purpose, not missing
    assert b.name == "big" and b.timestamp > 0 and b.opts == q.get_job(big).opts
    assert "data" not in b.raw

    one = q.get_job(big, max_value_bytes=1024)
    assert one.left_out == b.left_out and one.data is None
    assert q.get_job(big).data["blob"] == "x" * BIG  # an uncapped read is whole


def test_the_cap_is_in_bytes_and_inclusive(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    q = new_queue(redis_url, qname)
    job = q.add("j", "é" * 10).id  # data '"éé...é"': 2 + 20 bytes
    at_cap = q.get_job(job, max_value_bytes=22)
    assert at_cap.data == "é" * 10 and "data" not in at_cap.left_out
    assert q.get_job(job, max_value_bytes=21).left_out["data"] == 22


def test_gone_jobs_are_skipped_and_a_missing_job_is_none(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    q = new_queue(redis_url, qname)
    ids = [q.add("j", {"i": i}).id for i in range(3)]
    r.delete(q.keys.job(ids[1]))
    found = q.get_jobs("waiting", max_value_bytes=100, asc=True)
    assert [j.id for j in found] == [ids[0], ids[2]]
    assert q.get_job("nope", max_value_bytes=100) is None


def test_async_queue_reads_the_same(redis_url: str, qname: str) -> None:
    Queue(qname, redis_url).add("big", {"blob": "x" * 10_000})

    async def read() -> None:
        aq = AsyncQueue(qname, redis_url)
        [job] = await aq.get_jobs("waiting", max_value_bytes=100)
        assert job.data is None and job.left_out["data"] > 10_000
        await aq.close()

    asyncio.run(read())


def test_states_come_with_the_fields_when_asked(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """get_job_with_state / get_jobs_with_states give each job's state from the
    same read as its fields; a missing job is (None, UNKNOWN)."""
    q = new_queue(redis_url, qname)
    waiting = q.add("w", {}).id
    delayed = q.add("d", {}, delay=60_000).id
    prioritized = q.add("p", {}, priority=3).id
    job, state = q.get_job_with_state(delayed, max_value_bytes=100)
    assert job.name == "d" and state.value == "delayed"
    assert q.get_job_with_state("nope") == (None, JobState.UNKNOWN)
    pairs = q.get_jobs_with_states(["waiting", "delayed", "prioritized"])
    assert {j.id: s.value for j, s in pairs} == {
        waiting: "waiting",
        delayed: "delayed",
        prioritized: "prioritized",
    }
