"""Flows and job schedulers end to end with Bullpen workers only (the Node
side of both is in tests/interop)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from queues import AsyncFlowProducer, AsyncWorker, FlowProducer, Job, Queue
from queues.exceptions import InvalidJobOptions
from tests.helpers import wait_until


@contextmanager
def running(
    queue: str, redis_url: str, processor: Callable[[Job], Any]
) -> Iterator[None]:
    """An AsyncWorker on a thread for the duration of the block."""
    worker = AsyncWorker(queue, processor, connection=redis_url, stalled_interval=500)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=lambda: loop.run_until_complete(worker.run(install_signals=False))
    )
    thread.start()
    try:
        yield
    finally:
        loop.call_soon_threadsafe(worker.close)
        thread.join(20)
        loop.close()


async def _work(job: Job) -> Any:
    if job.name == "parent":
        return await job.get_children_values()
    if job.data.get("fail"):
        raise RuntimeError(job.data["fail"])
    return job.data["n"] * 10


def test_flow_parent_gets_children_values(redis_url: str, qname: str) -> None:
    """A parent runs after its children (in two queues) with their values."""
    other = qname + "b"
    with FlowProducer(redis_url) as producer:
        tree = producer.add(
            {
                "name": "parent",
                "queue_name": qname,
                "children": [
                    {"name": "c", "queue_name": qname, "data": {"n": 1}},
                    {
                        "name": "c",
                        "queue_name": other,
                        "data": {"n": 2},
                        "opts": {"job_id": "two"},
                    },
                ],
            }
        )
    queue = Queue(qname, redis_url)
    assert queue.get_job_state(tree.job.id) == "waiting-children"
    with running(qname, redis_url, _work), running(other, redis_url, _work):
        wait_until(lambda: queue.get_job_state(tree.job.id) == "completed")
    kid = tree.children[0].job.id
    assert queue.get_job(tree.job.id).returnvalue == {
        f"bull:{qname}:{kid}": 10,
        f"bull:{other}:two": 20,
    }
    queue.close()


def test_fpof_child_fails_parent(redis_url: str, qname: str) -> None:
    """A failing fail_parent_on_failure child fails its parent with `child <key>
    failed`, without running the parent's processor."""
    with FlowProducer(redis_url) as producer:
        tree = producer.add(
            {
                "name": "parent",
                "queue_name": qname,
                "children": [
                    {
                        "name": "c",
                        "queue_name": qname,
                        "data": {"fail": "x"},
                        "opts": {"fail_parent_on_failure": True, "job_id": "k"},
                    }
                ],
            }
        )
    queue = Queue(qname, redis_url)
    with running(qname, redis_url, _work):
        wait_until(lambda: queue.get_job_state(tree.job.id) == "failed")
    assert queue.get_job(tree.job.id).failed_reason == f"child bull:{qname}:k failed"
    queue.close()


def test_flow_options_are_checked(redis_url: str, qname: str) -> None:
    """Two failure flags together, or deduplication on a flow parent, are
    refused before anything is written."""
    with FlowProducer(redis_url) as producer:
        with pytest.raises(InvalidJobOptions):
            producer.add(
                {
                    "name": "p",
                    "queue_name": qname,
                    "children": [
                        {
                            "name": "c",
                            "queue_name": qname,
                            "opts": {
                                "fail_parent_on_failure": True,
                                "ignore_dependency_on_failure": True,
                            },
                        }
                    ],
                }
            )
        with pytest.raises(InvalidJobOptions):
            producer.add(
                {
                    "name": "p",
                    "queue_name": qname,
                    "opts": {"deduplication": {"id": "d"}},
                    "children": [{"name": "c", "queue_name": qname}],
                }
            )
    assert Queue(qname, redis_url).get_counts("waiting", "waiting-children") == {
        "waiting": 0,
        "waiting-children": 0,
    }


def test_async_flow_producer(redis_url: str, qname: str) -> None:
    """AsyncFlowProducer has the same methods, awaited."""

    async def main() -> Any:
        async with AsyncFlowProducer(redis_url) as producer:
            tree = await producer.add(
                {
                    "name": "p",
                    "queue_name": qname,
                    "children": [{"name": "c", "queue_name": qname}],
                }
            )
            return tree, await producer.get_flow(qname, tree.job.id)

    tree, read = asyncio.run(main())
    assert read.job.id == tree.job.id
    assert [c.job.id for c in read.children] == [tree.children[0].job.id]


def test_scheduler_keeps_producing_on_bullpen_workers(
    redis_url: str, qname: str
) -> None:
    """Each iteration a worker takes adds the next, so an `every` scheduler
    runs on; a `limit` stops it."""
    queue = Queue(qname, redis_url)
    queue.upsert_job_scheduler("s", every_ms=100, limit=4, template={"data": {"n": 1}})
    with running(qname, redis_url, _work):
        wait_until(lambda: queue.get_counts("completed")["completed"] == 4)
        time.sleep(0.3)
    assert queue.get_counts("completed", "delayed", "waiting") == {
        "completed": 4,
        "delayed": 0,
        "waiting": 0,
    }
    assert queue.get_job_scheduler("s").iteration_count == 4
    queue.close()
