"""Claim policies (queues/worker/policy.py): a worker claims what its
`claim_policy` allows, re-asks when one of its jobs ends or the policy wakes
it, and `concurrency` is the policy it has without one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from queues import AsyncQueue, AsyncWorker, Job
from queues.worker import ClaimPolicy, Concurrency


class Gate:
    """A policy the test opens: up to `allowed` jobs at once."""

    def __init__(self) -> None:
        self.allowed = 0
        self.asked: list[int] = []
        self.wake: Callable[[], None] | None = None

    def capacity(self, claimed: int) -> int:
        self.asked.append(claimed)
        return self.allowed - claimed

    def bind(self, wake: Callable[[], None]) -> None:
        self.wake = wake

    def open(self, allowed: int) -> None:
        """Allow `allowed` at once, and wake the worker (as a policy must)."""
        self.allowed = allowed
        assert self.wake is not None
        self.wake()


async def settle(aq: AsyncQueue, counts: dict[str, int], timeout: float = 10) -> None:
    """Wait until the queue's counts are `counts`."""
    async with asyncio.timeout(timeout):
        while await aq.get_counts(*counts) != counts:
            await asyncio.sleep(0.05)


def test_the_policy_decides_how_many_jobs_are_claimed(
    redis_url: str, qname: str
) -> None:
    """Closed, the worker claims nothing despite concurrency=5; opened to 2
    (its wake called), it runs 2 at once; when they end it asks again and
    takes the others, 2 at a time."""
    gate = Gate()
    running: list[str] = []
    most = 0

    async def process(job: Job) -> Any:
        nonlocal most
        running.append(job.id)
        most = max(most, len(running))
        await asyncio.sleep(0.3)
        running.remove(job.id)

    async def main() -> None:
        async with AsyncQueue(qname, redis_url) as aq:
            await aq.add_bulk([{"name": "j", "data": {}} for _ in range(5)])
            worker = AsyncWorker(
                qname,
                process,
                connection=redis_url,
                concurrency=5,
                claim_policy=gate,
                drain_delay=0.2,
            )
            run = asyncio.create_task(worker.run(install_signals=False))
            await asyncio.sleep(0.5)
            assert gate.wake is not None and gate.asked and not running
            idle = {"waiting": 5, "active": 0}
            assert await aq.get_counts("waiting", "active") == idle
            gate.open(2)
            await settle(aq, {"completed": 5})
            worker.close()
            await asyncio.wait_for(run, 10)
            assert most == 2
            assert 2 in gate.asked  # asked again while two were running

    asyncio.run(main())


def test_concurrency_is_the_default_policy(redis_url: str, qname: str) -> None:
    """Without claim_policy a worker's policy is Concurrency(concurrency)."""
    worker = AsyncWorker(qname, lambda job: None, connection=redis_url, concurrency=3)
    assert isinstance(worker.claim_policy, Concurrency)
    assert worker.claim_capacity() == 3
    assert Concurrency(3).capacity(1) == 2
    assert isinstance(Gate(), ClaimPolicy)


def test_a_claim_policy_needs_capacity_and_bind(redis_url: str, qname: str) -> None:
    """Anything else is refused when the worker is made."""
    not_a_policy: Any = 3
    with pytest.raises(TypeError, match="claim_policy"):
        AsyncWorker(
            qname, lambda job: None, connection=redis_url, claim_policy=not_a_policy
        )
