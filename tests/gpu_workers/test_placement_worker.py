"""Placement as a real worker's claim gate (queues.worker.ClaimGate): an
AsyncWorker takes the jobs whose model is resident first and the others as
they come to suit its GPU, all through BullMQ's ordinary claim."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import redis

from gpu_workers.keys import BullpenKeys
from gpu_workers.placement import Placement
from queues import AsyncWorker, Job, Queue
from tests.gpu_workers.placement_helpers import (
    GPU,
    OTHER,
    View,
    client_for,
    registry,
)

BOUND_S = 60.0


class Gated(Placement):
    """Placement with a claim policy's two methods: one job at a time."""

    def capacity(self, claimed: int) -> int:
        return 1 - claimed

    def bind(self, wake: Callable[[], None]) -> None:
        pass


async def settle(q: Queue, done: int, timeout: float = 20) -> None:
    """Wait until `done` jobs completed."""
    async with asyncio.timeout(timeout):
        while q.get_counts("completed")["completed"] < done:
            await asyncio.sleep(0.05)


def test_a_worker_takes_warm_jobs_first_and_the_others_when_they_suit(
    redis_url: str, qname: str, r: redis.Redis
) -> None:
    """Waiting (oldest first): m1 (open on another GPU), m3 (cold, no room
    here), m2, plain, m2; m2 resident here; age bound and cold hold 60 s.
    The worker runs m2, plain, m2 and holds; m3 runs once it fits here
    without evicting; m1 once it is no longer open elsewhere and is wanted
    here; a job that waited the age bound runs although open elsewhere."""
    keys = BullpenKeys()
    view = View(here=frozenset({"m2"}))
    runs: list[str] = []
    olds: list[Any] = []  # the m1 jobs' `old`, in the order they ran

    async def main() -> None:
        client = await client_for(redis_url)
        with Queue(qname, redis_url) as q:
            for name in ("m1", "m3", "m2", "plain", "m2"):
                q.add(name, {})
            r.zadd(keys.model_open("m1"), {OTHER: 10**13})
            gate = Gated(
                client,
                q.keys,
                keys,
                GPU,
                view,
                registry().model_for,
                age_bound_s=BOUND_S,
                cold_hold_s=BOUND_S,
                scan=16,
            )

            async def process(job: Job) -> Any:
                runs.append(job.name)
                if job.name == "m1":
                    olds.append(job.data.get("old"))

            worker = AsyncWorker(
                qname, process, connection=redis_url, claim_policy=gate
            )
            run = asyncio.create_task(worker.run(install_signals=False))
            await settle(q, 3)
            await asyncio.sleep(0.3)
            assert runs == ["m2", "plain", "m2"]
            assert q.get_counts("waiting")["waiting"] == 2
            assert gate.stats.holds >= 1
            view.room = frozenset({"m3"})
            await settle(q, 4)
            r.zadd(keys.model_open("m1"), {OTHER: 1})  # its entry expired
            view.want = frozenset({"m1"})
            await settle(q, 5)
            r.zadd(keys.model_open("m1"), {OTHER: 10**13})
            view.want = frozenset()
            # A new m1, open elsewhere and not wanted: held. The old one comes
            # while the worker holds, so the gate sees it (with nothing
            # waiting, a job added between its look and the claim is taken in
            # BullMQ's order, which on a busy machine left `last` unchanged).
            q.add("m1", {"old": False})
            async with asyncio.timeout(20):
                while gate.last is None or gate.last.job_id is not None:
                    await asyncio.sleep(0.02)
            stamp = int(time.time() * 1000 - BOUND_S * 1000 - 1)
            q.add("m1", {"old": True}, timestamp=stamp)
            await settle(q, 6)
            worker.close()
            await asyncio.wait_for(run, 10)
            assert gate.stats.errors == 0
            # The old one was chosen for its age; the new one is held since.
            assert gate.stats.reasons.get("waited past the age bound") == 1
            assert gate.last is not None and gate.last.job_id is None
            assert q.get_counts("waiting")["waiting"] == 1
        await client.aclose()

    asyncio.run(main())
    assert runs == ["m2", "plain", "m2", "m3", "m1", "m1"]
    assert olds == [None, True]


def test_a_hold_wakes_the_idle_gpu_the_job_suits(redis_url: str, qname: str) -> None:
    """Two idle workers block on the queue's marker (30 s drain delay); an m1
    job arrives, resident on GPU B only. If A's wait takes the marker, A
    holds and re-adds it, so B wakes and runs the job long before its own
    wait would have ended."""
    keys = BullpenKeys()
    ran_on: list[str] = []

    async def main() -> None:
        client = await client_for(redis_url)
        with Queue(qname, redis_url) as q:
            workers = []
            for gpu, here in (("GPU-A", frozenset()), ("GPU-B", frozenset({"m1"}))):
                gate = Gated(
                    client,
                    q.keys,
                    keys,
                    gpu,
                    View(here=here),
                    registry().model_for,
                    age_bound_s=BOUND_S,
                    cold_hold_s=BOUND_S,
                    scan=16,
                )

                async def process(job: Job, gpu: str = gpu) -> Any:
                    ran_on.append(gpu)

                workers.append(
                    AsyncWorker(
                        qname,
                        process,
                        connection=redis_url,
                        claim_policy=gate,
                        drain_delay=30,
                    )
                )
            runs = [asyncio.create_task(w.run(install_signals=False)) for w in workers]
            await asyncio.sleep(0.5)  # both blocked on the marker
            q.add("m1", {})
            await settle(q, 1, timeout=10)
            for w in workers:
                w.close()
            await asyncio.wait_for(asyncio.gather(*runs), 10)
        await client.aclose()

    asyncio.run(main())
    assert ran_on == ["GPU-B"]
