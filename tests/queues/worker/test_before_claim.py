"""A claim policy's `before_claim` hook (queues/worker/policy.py): awaited
right before each claim; a hold claims nothing until it passes, every claim
(the finish script's included) goes through it, one job per claim, and a
hook that reorders the wait list gets the job it put at the head."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import redis.asyncio as aredis

from queues import AsyncQueue, AsyncWorker, Job
from queues.keys import QueueKeys
from queues.worker import ClaimGate


class Holding:
    """A policy whose hook holds until `open` is set, then lets `allowed`
    claims through (one job each) and holds again."""

    def __init__(self, limit: int, allowed: int) -> None:
        self.limit = limit
        self.open = False
        self.allowed = allowed
        self.held = 0
        self.let_through = 0
        self.wake: Callable[[], None] | None = None

    def capacity(self, claimed: int) -> int:
        return self.limit - claimed

    def bind(self, wake: Callable[[], None]) -> None:
        self.wake = wake

    async def before_claim(self) -> float:
        if not self.open or self.let_through >= self.allowed:
            self.held += 1
            return 0.05
        self.let_through += 1
        return 0.0


class Fronting:
    """A policy whose hook moves the job `target` (once it is set) to the
    head of the wait list, as placement does: LREM then RPUSH."""

    def __init__(self, client: Any, keys: QueueKeys) -> None:
        self.client = client
        self.keys = keys
        self.target: str | None = None
        self.calls = 0

    def capacity(self, claimed: int) -> int:
        return 1 - claimed

    def bind(self, wake: Callable[[], None]) -> None:
        pass

    async def before_claim(self) -> float:
        self.calls += 1
        if self.target is None:
            return 0.05
        if await self.client.lrem(self.keys.wait, -1, self.target):
            await self.client.rpush(self.keys.wait, self.target)
        return 0.0


async def settle(aq: AsyncQueue, counts: dict[str, int], timeout: float = 10) -> None:
    """Wait until the queue's counts are `counts`."""
    async with asyncio.timeout(timeout):
        while await aq.get_counts(*counts) != counts:
            await asyncio.sleep(0.05)


def test_a_hold_claims_nothing_and_every_claim_goes_through_the_hook(
    redis_url: str, qname: str
) -> None:
    """Held, the worker claims none of 5 jobs although it has 5 slots; let 3
    claims through, exactly 3 jobs run (one a claim: the finish script claims
    nothing, or it would have taken the other 2), and 2 stay waiting."""
    policy = Holding(limit=5, allowed=3)
    done: list[str] = []

    async def process(job: Job) -> Any:
        await asyncio.sleep(0.05)
        done.append(job.id)

    async def main() -> None:
        async with AsyncQueue(qname, redis_url) as aq:
            await aq.add_bulk([{"name": "j", "data": {}} for _ in range(5)])
            worker = AsyncWorker(
                qname,
                process,
                connection=redis_url,
                concurrency=5,
                claim_policy=policy,
                drain_delay=0.2,
            )
            assert isinstance(policy, ClaimGate)
            run = asyncio.create_task(worker.run(install_signals=False))
            await asyncio.sleep(0.5)
            assert policy.held >= 2 and not done
            idle = {"waiting": 5, "active": 0, "completed": 0}
            assert await aq.get_counts(*idle) == idle
            policy.open = True
            await settle(aq, {"completed": 3, "waiting": 2, "active": 0})
            await asyncio.sleep(0.5)  # and no more than 3
            assert await aq.get_counts("completed", "waiting") == {
                "completed": 3,
                "waiting": 2,
            }
            assert policy.let_through == 3 and len(done) == 3
            worker.close()
            await asyncio.wait_for(run, 10)

    asyncio.run(main())


def test_the_job_the_hook_fronted_is_the_one_claimed(
    redis_url: str, qname: str
) -> None:
    """Of 5 waiting jobs the hook fronts the fourth added: the worker runs it
    first, then the others in BullMQ's order (oldest first)."""
    order: list[str] = []

    async def process(job: Job) -> Any:
        order.append(job.id)

    async def main() -> None:
        client = aredis.Redis.from_url(redis_url, decode_responses=True)
        async with AsyncQueue(qname, redis_url) as aq:
            jobs = await aq.add_bulk([{"name": "j", "data": {}} for _ in range(5)])
            ids = [j.id for j in jobs]
            policy = Fronting(client, aq.keys)
            worker = AsyncWorker(
                qname,
                process,
                connection=redis_url,
                claim_policy=policy,
                drain_delay=0.2,
            )
            run = asyncio.create_task(worker.run(install_signals=False))
            await asyncio.sleep(0.3)
            assert not order and policy.calls >= 1
            policy.target = ids[3]
            await settle(aq, {"completed": 5})
            worker.close()
            await asyncio.wait_for(run, 10)
        await client.aclose()
        assert order[0] == ids[3]
        assert order[1:] == [i for i in ids if i != ids[3]]

    asyncio.run(main())
