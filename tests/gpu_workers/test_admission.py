"""VRAM admission in isolation: budgets, the claim gate, and the invariant."""

from __future__ import annotations

import asyncio
import random

import pytest

from gpu_workers.admission import VramAdmission, compute_budget
from gpu_workers.exceptions import JobTooLarge
from queues.worker import ClaimPolicy

GiB = 2**30


def test_compute_budget() -> None:
    """total - reserve - margin - one context per process, times the share."""
    assert compute_budget(24 * GiB, GiB, GiB // 2, GiB) == int(21.5 * GiB)
    assert compute_budget(24 * GiB, GiB, GiB // 2, GiB, processes=2, share=0.5) == (
        (24 * GiB - GiB - GiB - GiB) // 2
    )
    assert compute_budget(GiB, GiB, GiB, GiB) == 0


def test_claim_gate() -> None:
    """A claim needs a free slot, free budget and no job waiting for budget."""
    adm = VramAdmission(10 * GiB, slots=2)
    assert adm.claim_capacity(claimed=0, waiting=0) == 1
    assert adm.claim_capacity(claimed=1, waiting=1) == 0
    assert adm.claim_capacity(claimed=2, waiting=0) == 0
    adm.admitted["a"] = 10 * GiB
    assert adm.claim_capacity(claimed=1, waiting=0) == 0


def test_admission_is_the_workers_claim_policy() -> None:
    """As a queue worker's claim policy, capacity(claimed) counts the claimed
    jobs not admitted yet as waiting; the worker is woken when a job is
    admitted, when budget is released and when the slot count changes."""
    adm = VramAdmission(10 * GiB, slots=2)
    assert isinstance(adm, ClaimPolicy)
    wakes: list[str] = []
    adm.bind(lambda: wakes.append("wake"))
    assert adm.capacity(claimed=0) == 1
    assert adm.capacity(claimed=1) == 0  # claimed, still waiting for budget
    asyncio.run(adm.admit("a", 4 * GiB))
    assert wakes == ["wake"] and adm.capacity(claimed=1) == 1
    asyncio.run(adm.admit("b", 4 * GiB))
    assert adm.capacity(claimed=2) == 0  # both slots taken
    adm.resize(3)
    assert len(wakes) == 3 and adm.capacity(claimed=2) == 1
    asyncio.run(adm.release("a"))
    assert len(wakes) == 4 and adm.free_bytes == 6 * GiB


def test_too_large_names_both_numbers() -> None:
    """A job over the whole budget fails at once with both sizes in the reason."""
    adm = VramAdmission(20 * GiB, slots=3, gpu="SIM-x-0")
    with pytest.raises(JobTooLarge) as info:
        asyncio.run(adm.admit("j", 30 * GiB))
    text = str(info.value)
    assert str(30 * GiB) in text and str(20 * GiB) in text and "SIM-x-0" in text


def test_waiting_job_is_admitted_when_budget_frees() -> None:
    """A job that does not fit waits until running jobs release enough."""

    async def scenario() -> list[str]:
        adm = VramAdmission(10 * GiB, slots=3)
        order: list[str] = []
        await adm.admit("big", 8 * GiB)
        waiter = asyncio.create_task(adm.admit("next", 5 * GiB))
        await asyncio.sleep(0.01)
        assert not waiter.done() and adm.committed_bytes == 8 * GiB
        order.append("released")
        await adm.release("big")
        assert await waiter is True
        order.append("admitted")
        assert adm.committed_bytes == 5 * GiB
        cancelled = asyncio.create_task(adm.admit("x", 9 * GiB, abort=lambda: True))
        assert await cancelled is False and "x" not in adm.admitted
        return order

    assert asyncio.run(scenario()) == ["released", "admitted"]


def test_random_jobs_never_overcommit() -> None:
    """500 random jobs through one budget: committed <= budget at every step."""

    async def scenario() -> int:
        rng = random.Random(7)
        adm = VramAdmission(21 * GiB, slots=3)
        worst = 0
        slots = asyncio.Semaphore(3)

        async def job(i: int, need: int) -> None:
            nonlocal worst
            async with slots:
                await adm.admit(str(i), need)
                worst = max(worst, adm.committed_bytes)
                assert adm.committed_bytes <= adm.budget_bytes
                await asyncio.sleep(rng.random() / 1000)
                await adm.release(str(i))

        await asyncio.gather(*(job(i, rng.randint(1, 21) * GiB) for i in range(500)))
        return worst

    worst = asyncio.run(scenario())
    assert GiB < worst <= 21 * GiB
