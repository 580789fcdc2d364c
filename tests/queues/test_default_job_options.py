"""Queue-level default job options (BullMQ's `defaultJobOptions`): applied
under each job's own options, key by key, on Queue, AsyncQueue, job
scheduler templates and FlowProducer nodes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis

from queues import AsyncQueue, FlowProducer, Queue
from queues.exceptions import InvalidJobOptions
from tests.helpers import wait_until
from tests.queues.worker.helpers import worker_thread

SEED_DEFAULTS = {
    "attempts": 3,
    "backoff": {"type": "exponential", "delay": 5000},
    "remove_on_complete": {"age": 3600},
    "remove_on_fail": {"age": 86400},
}


def stored_opts(r: redis.Redis, qname: str, job_id: str) -> dict[str, Any]:
    """The job's opts JSON as Redis holds it."""
    return dict(json.loads(r.hget(f"bull:{qname}:{job_id}", "opts") or "{}"))


def test_queue_defaults_are_stored_with_each_job(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """A job added without options gets the queue's attempts, backoff and
    retention, as Node stores them (the seed article's queue)."""
    with Queue(qname, redis_url, default_job_options=SEED_DEFAULTS) as q:
        job = q.add("gen", {"prompt": "a cat"})
    opts = stored_opts(r, qname, job.id)
    assert opts["attempts"] == 3
    assert opts["backoff"] == {"type": "exponential", "delay": 5000}
    assert opts["removeOnComplete"] == {"age": 3600}
    assert opts["removeOnFail"] == {"age": 86400}
    assert job.attempts == 3


def test_job_options_replace_defaults_key_by_key(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """A key the job gives replaces the default whole (backoff is not merged
    field by field; False and None unset it); other defaults still apply."""
    with Queue(qname, redis_url, default_job_options=SEED_DEFAULTS) as q:
        job = q.add(
            "gen",
            {},
            backoff={"type": "fixed", "delay": 10},
            remove_on_complete=False,
            remove_on_fail=None,
            priority=4,
        )
    opts = stored_opts(r, qname, job.id)
    assert opts["backoff"] == {"type": "fixed", "delay": 10}
    assert "removeOnComplete" not in opts
    assert "removeOnFail" not in opts
    assert opts["attempts"] == 3
    assert opts["priority"] == 4


def test_add_bulk_and_async_queue_apply_defaults(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """add_bulk and AsyncQueue.add start from the same defaults."""
    with Queue(qname, redis_url, default_job_options={"attempts": 5}) as q:
        bulk = q.add_bulk([{"name": "a"}, {"name": "b", "opts": {"attempts": 2}}])

    async def add_async() -> str:
        async with AsyncQueue(
            qname, redis_url, default_job_options={"lifo": True, "attempts": 7}
        ) as aq:
            return str((await aq.add("c", {})).id)

    async_id = asyncio.run(add_async())
    assert stored_opts(r, qname, bulk[0].id)["attempts"] == 5
    assert stored_opts(r, qname, bulk[1].id)["attempts"] == 2
    opts = stored_opts(r, qname, async_id)
    assert (opts["attempts"], opts["lifo"]) == (7, True)


def test_defaults_are_checked_when_the_queue_is_made(redis_url: str) -> None:
    """A bad default, or an option BullMQ lets no queue default (job_id,
    deduplication), is refused at construction, not at the first add."""
    for bad in (
        {"attempts": -1},
        {"backoff": {"delay": 3}},
        {"job_id": "same-for-all"},
        {"deduplication": {"id": "x"}},
        {"nonsense": 1},
    ):
        with pytest.raises(InvalidJobOptions):
            Queue("q", redis_url, default_job_options=bad)
    q = Queue("q", redis_url, default_job_options={"attempts": 2})
    copy = q.default_job_options
    copy["attempts"] = 9
    assert q.default_job_options == {"attempts": 2}
    q.close()


def test_worker_retries_by_the_queue_defaults(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """A job added with only the queue's defaults is retried as they say:
    three attempts, then failed and kept."""
    calls: list[int] = []

    def fail(job: Any) -> None:
        calls.append(job.attempts_made)
        raise RuntimeError("boom")

    defaults = {"attempts": 3, "backoff": {"type": "fixed", "delay": 20}}
    with Queue(qname, redis_url, default_job_options=defaults) as q:
        job = q.add("gen", {})
        with worker_thread(qname, fail, redis_url, drain_delay=0.2):
            wait_until(lambda: q.get_counts("failed")["failed"] == 1, 10)
        assert calls == [0, 1, 2]
        assert r.hget(f"bull:{qname}:{job.id}", "atm") == "3"


def test_scheduler_template_lies_over_the_queue_defaults(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """upsert_job_scheduler's template opts lie over the queue's defaults (its
    delay does not apply: the scheduler sets it), as BullMQ's does."""
    defaults = {"attempts": 4, "delay": 60_000, "remove_on_fail": 10}
    with Queue(qname, redis_url, default_job_options=defaults) as q:
        job = q.upsert_job_scheduler(
            "tick", every_ms=1000, template={"name": "t", "opts": {"attempts": 2}}
        )
        assert job is not None
        template = q.get_job_scheduler("tick").template
    opts = stored_opts(r, qname, job.id)
    assert opts["attempts"] == 2
    assert opts["removeOnFail"] == 10
    assert opts["delay"] <= 1000
    assert template["opts"]["removeOnFail"] == 10


def test_flow_nodes_take_their_queues_defaults(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """FlowProducer.add(default_job_options={queue: ...}) applies each queue's
    defaults under its nodes' own options (BullMQ's queuesOptions)."""
    children_q = qname + "c"
    flow = {
        "name": "parent",
        "queue_name": qname,
        "children": [
            {"name": "c1", "queue_name": children_q},
            {"name": "c2", "queue_name": children_q, "opts": {"attempts": 1}},
        ],
    }
    with FlowProducer(redis_url) as producer:
        tree = producer.add(
            flow,
            default_job_options={
                qname: {"remove_on_complete": True},
                children_q: {"attempts": 6},
            },
        )
        with pytest.raises(InvalidJobOptions):
            producer.add(flow, default_job_options={qname: {"attempts": "x"}})
    parent = stored_opts(r, qname, tree.job.id)
    c1, c2 = (stored_opts(r, children_q, c.job.id) for c in tree.children)
    assert parent["removeOnComplete"] is True and parent["attempts"] == 0
    assert (c1["attempts"], c2["attempts"]) == (6, 1)
