"""Per-group limits (docs/groups.md): concurrency, rate, pause, holds; a
blocked group never holds up the others, and nothing waiting is lost."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from queues import Job, Queue
from tests.queues.groups.helpers import completed, running


def test_group_concurrency_is_never_exceeded_and_others_go_on(
    q: Queue, redis_url: str, qname: str
) -> None:
    """Group a capped at 2, b unlimited; a worker with 8 slots: a never has
    more than 2 running at once, b's jobs use the other slots, all finish."""
    q.set_group("a", concurrency=2)
    for g in ("a", "b"):
        for _ in range(20):
            q.add("j", {"g": g}, group=g)
    now = {"a": 0, "b": 0}
    peak = {"a": 0, "b": 0}

    async def process(job: Job) -> Any:
        g = job.data["g"]
        now[g] += 1
        peak[g] = max(peak[g], now[g])
        await asyncio.sleep(0.03)
        now[g] -= 1

    async def main() -> None:
        async with running(redis_url, qname, process, 8, 0.2) as aq:
            await completed(aq, 40)

    asyncio.run(main())
    assert peak["a"] == 2
    assert peak["b"] > 2
    info = q.get_group("a")
    assert info is not None and info.active == 0 and info.waiting == 0


def test_a_cap_set_while_the_groups_jobs_run_counts_them(
    q: Queue, redis_url: str, qname: str
) -> None:
    """Four of group a's jobs run when a cap of 2 is set: finishing the first
    two starts nothing of a (4 and 3 still run, each finish fetching in the
    same call), the third brings it to 1 and one more starts: every start
    after the cap saw fewer than 2 running."""
    for i in range(8):
        q.add("j", {"i": i}, group="a")
    gates: dict[int, asyncio.Event] = {}
    started: list[tuple[int, int]] = []  # (job, a's jobs running before it)
    state = {"running": 0}

    async def process(job: Job) -> Any:
        i = job.data["i"]
        started.append((i, state["running"]))
        state["running"] += 1
        gates[i] = asyncio.Event()
        await gates[i].wait()
        state["running"] -= 1

    async def until(check: Any, what: str) -> None:
        async with asyncio.timeout(20):
            while not check():
                await asyncio.sleep(0.01)

    async def main() -> None:
        async with running(redis_url, qname, process, 4, 0.2) as aq:
            await until(lambda: len(started) == 4, "four running")
            await aq.set_group("a", concurrency=2)
            before = len(started)
            for done in (1, 2):
                gates[started[done - 1][0]].set()
                await completed(aq, done)
                # (A job its finish fetched would start on this loop by now.)
                await asyncio.sleep(0.2)
                assert len(started) == before, started
            gates[started[2][0]].set()
            await completed(aq, 3)
            await until(lambda: len(started) == before + 1, "one more start")
            while (await aq.get_counts("completed"))["completed"] < 8:
                for gate in list(gates.values()):
                    gate.set()
                await asyncio.sleep(0.01)
            info = await aq.get_group("a")
            assert info is not None and info.active == 0 and info.waiting == 0

    asyncio.run(main())
    after_cap = started[4:]
    assert len(after_cap) == 4
    assert all(before < 2 for _, before in after_cap), started


def test_group_rate_limit_holds_within_a_window(
    q: Queue, redis_url: str, qname: str
) -> None:
    """Group a may start 3 jobs per 400 ms: no 400 ms window holds more than
    3 of a's starts (+1 for the window edge between two clocks: never 2
    windows' worth), and b is not slowed by it."""
    q.set_group("a", rate_max=3, rate_duration_ms=400)
    for g in ("a", "b"):
        for _ in range(12):
            q.add("j", {"g": g}, group=g)
    starts: dict[str, list[float]] = {"a": [], "b": []}

    async def process(job: Job) -> Any:
        # When the claim took it (processedOn, ms): what the limit counts. A
        # processor's own start can lag its claim on a busy machine, which
        # made a window's last start look like the next window's.
        assert job.processed_on is not None
        starts[job.data["g"]].append(job.processed_on / 1000)

    async def main() -> None:
        async with running(redis_url, qname, process, 4, 0.2) as aq:
            await completed(aq, 24, 30)

    asyncio.run(main())
    a = sorted(starts["a"])
    # 12 jobs at 3 per window need at least 3 full windows after the first.
    assert a[-1] - a[0] >= 3 * 0.4 * 0.9
    for i, t in enumerate(a):
        in_window = [u for u in a[i:] if u - t < 0.4 * 0.9]
        assert len(in_window) <= 3, (i, in_window)
    assert max(starts["b"]) < a[-1]


def test_pause_and_resume_one_group(q: Queue, redis_url: str, qname: str) -> None:
    """A paused group's jobs wait (none lost) while the others run; resumed,
    they run."""
    for g in ("a", "b"):
        for _ in range(5):
            q.add("j", {"g": g}, group=g)
    q.pause_group("a")
    seen: list[str] = []

    async def process(job: Job) -> Any:
        seen.append(job.data["g"])

    async def main() -> None:
        async with running(redis_url, qname, process, 2, 0.2) as aq:
            await completed(aq, 5)
            await asyncio.sleep(0.3)
            assert seen == ["b"] * 5
            info = await aq.get_group("a")
            assert info is not None and info.paused and info.waiting == 5
            assert (await aq.get_group_summary()).paused == 1
            await aq.resume_group("a")

            await completed(aq, 10)

    asyncio.run(main())
    assert seen.count("a") == 5


def test_a_hold_ends_at_its_time_or_on_release(
    q: Queue, redis_url: str, qname: str
) -> None:
    """A quota-style hold: a held group waits; a timed hold ends by itself
    (the worker wakes for it), an open one when released."""
    for g in ("a", "b"):
        for _ in range(3):
            q.add("j", {"g": g}, group=g)
    until = int(time.time() * 1000) + 800
    q.hold_group("a", "quota", until_ms=until, info={"used_s": 10, "budget_s": 5})
    q.hold_group("b", "quota")
    info = q.get_group("a")
    assert info is not None and info.hold == "quota" and info.hold_until_ms == until
    assert info.hold_info == {"used_s": 10, "budget_s": 5}
    assert q.get_group_summary().held == 2
    finished: dict[str, float] = {}

    async def process(job: Job) -> Any:
        finished[job.data["g"]] = time.time() * 1000

    async def main() -> None:
        async with running(redis_url, qname, process, 2, 5) as aq:
            await completed(aq, 3)
            assert "b" not in finished and finished["a"] >= until
            assert await aq.release_group("b", "other") == 0
            assert await aq.release_group("b", "quota") == 1

            await completed(aq, 6)

    asyncio.run(main())
