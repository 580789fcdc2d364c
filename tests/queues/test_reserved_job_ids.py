"""Custom job ids that would make a job hash out of one of the queue's own keys
(`wait`, `meta`, `stalled-check`, `metrics:failed:data`...) are refused on every
add path, and read paths answer "no such job" for them instead of WRONGTYPE."""

from __future__ import annotations

import asyncio

import pytest
import redis

from queues import AsyncQueue, FlowProducer, Job, JobState, Queue
from queues.exceptions import InvalidJobId, JobNotFound
from queues.keys import SUFFIXES
from tests.queues.test_cli import assert_error, cli

#: Every queue key suffix, plus ids whose key is a multi-part queue key.
RESERVED = [
    *SUFFIXES,
    "metrics",
    "metrics:failed:data",
    "de:x:y",
    "dn:a:b",
]


@pytest.mark.parametrize("job_id", RESERVED)
def test_queue_add_refuses_ids_that_name_queue_keys(
    r: redis.Redis, redis_url: str, qname: str, job_id: str
) -> None:
    """Queue.add raises InvalidJobId (a ValueError) and writes nothing."""
    with Queue(qname, redis_url) as q:
        q.add("first", {})  # the queue's keys exist, as in a live queue
        before = sorted(r.keys(q.keys.base + "*"))
        with pytest.raises(InvalidJobId, match="queue's own keys"):
            q.add("j", {}, job_id=job_id)
        with pytest.raises(ValueError):
            q.add_bulk([{"name": "a"}, {"name": "j", "opts": {"job_id": job_id}}])
        assert sorted(r.keys(q.keys.base + "*")) == before
        assert r.type(q.keys.wait) == "list" and r.llen(q.keys.wait) == 1


@pytest.mark.parametrize("job_id", ["-5", "0", "007", "12"])
def test_integer_like_ids_are_refused(redis_url: str, qname: str, job_id: str) -> None:
    """As BullMQ's Job.validateOptions: a custom id cannot read as an integer."""
    with Queue(qname, redis_url) as q, pytest.raises(InvalidJobId, match="integer"):
        q.add("j", job_id=job_id)


def test_async_queue_and_flows_refuse_them(redis_url: str, qname: str) -> None:
    """AsyncQueue.add and a flow node with a reserved id are refused too."""

    async def main() -> None:
        async with AsyncQueue(qname, redis_url) as aq:
            with pytest.raises(InvalidJobId):
                await aq.add("j", job_id="active")

    asyncio.run(main())
    flows = FlowProducer(redis_url)
    child = {"name": "c", "queue_name": qname, "opts": {"job_id": "limiter"}}
    with pytest.raises(InvalidJobId):
        flows.add({"name": "p", "queue_name": qname, "children": [child]})
    flows.close()


def test_scheduler_ids_cannot_hold_a_colon(redis_url: str, qname: str) -> None:
    """`repeat:<id>` would otherwise be a custom job's key, or another scheduler's."""
    with Queue(qname, redis_url) as q, pytest.raises(ValueError, match="':'"):
        q.upsert_job_scheduler("a:1", every_ms=1000)


def test_cli_add_refuses_them(redis_url: str, qname: str) -> None:
    """`add --job-id wait` exits 2 with one error line."""
    assert_error(
        cli(redis_url, "add", qname, "n", "--job-id", "wait"), "queue's own keys"
    )


@pytest.mark.parametrize("job_id", ["wait", "meta", "events", "repeat:sched"])
def test_reads_of_such_ids_find_no_job(
    r: redis.Redis, redis_url: str, qname: str, job_id: str
) -> None:
    """get_job / get_job_with_state answer None for an id naming a queue key,
    whatever type that key has; listing a state that holds such an id (as a
    client without the check writes it) skips it instead of failing."""
    with Queue(qname, redis_url) as q:
        q.add("a", {})
        q.pause()
        q.upsert_job_scheduler("sched", every_ms=60_000)
        r.xadd(q.keys.events, {"event": "x"})
        r.lpush(q.keys.wait, job_id)
        assert q.get_job(job_id) is None
        assert q.get_job(job_id, max_value_bytes=100) is None
        assert q.get_job_with_state(job_id)[0] is None
        for cap in (None, 100):
            listed = [j.id for j in q.get_jobs("waiting", max_value_bytes=cap)]
            assert "1" in listed and job_id not in listed


def test_a_job_key_of_another_type_reads_as_gone(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A job id whose key is not a hash (a log list: `<id>:logs`) reads as no
    job, not as a WRONGTYPE error."""
    with Queue(qname, redis_url) as q:
        job = q.add("a", {})
        job.log("line")
        assert q.get_job(f"{job.id}:logs") is None
        assert q.get_job_with_state(f"{job.id}:logs")[0] is None


def test_acting_on_such_an_id_never_touches_the_queue_key(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """An id `wait` that another client pushed into `wait` is no job: its state
    is unknown, removing it removes nothing (the wait list survives) and job
    transitions on it raise JobNotFound."""
    with Queue(qname, redis_url) as q:
        q.add("a", {})
        r.lpush(q.keys.wait, "wait")
        assert q.get_job_state("wait") is JobState.UNKNOWN
        assert q.remove_job("wait") is False
        assert r.type(q.keys.wait) == "list" and r.llen(q.keys.wait) == 2
        with pytest.raises(JobNotFound):
            Job(q, "meta").update_progress(5)
        assert r.type(q.keys.meta) == "hash"
