"""ThreadRunner: plain `def` processors on threads, results back on the loop."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from queues.worker.threads import ThreadRunner


def test_results_and_errors_come_back_on_the_loop_batched() -> None:
    """Calls run on the runner's named threads, as many at once as it has
    threads; values and exceptions reach the awaiting coroutines; calls that
    finish together are handed back with fewer loop wake-ups than calls.

    Nothing here depends on the machine's speed: the first four calls meet
    at a barrier (so four run at once), and the loop is kept busy until all
    forty have finished, so that they finish "together" by construction."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        runner = ThreadRunner(loop, 4, "worker-q")
        running = 0
        most = 0
        lock = threading.Lock()
        names: set[str] = set()
        first_four = threading.Barrier(4, timeout=60)

        def work(n: int) -> int:
            nonlocal running, most
            with lock:
                running += 1
                most = max(most, running)
                names.add(threading.current_thread().name)
            if n < 4:
                first_four.wait()
            with lock:
                running -= 1
            if n == 7:
                raise ValueError("seven")
            return n * 2

        wakeups = 0
        hand_back = runner._hand_back

        def counted() -> None:
            nonlocal wakeups
            wakeups += 1
            hand_back()

        runner._hand_back = counted  # type: ignore[method-assign]
        futures = [runner.submit(work, n) for n in range(40)]
        # Keep the loop busy (it cannot run a hand-back) until every call has
        # finished and been queued for it.
        deadline = time.monotonic() + 60
        while True:
            with runner._lock:
                finished = len(runner._done)
            if finished == 40 or time.monotonic() > deadline:
                break
            time.sleep(0.002)
        results = await asyncio.gather(*futures, return_exceptions=True)
        assert [r for i, r in enumerate(results) if i != 7] == [
            n * 2 for n in range(40) if n != 7
        ]
        assert isinstance(results[7], ValueError) and str(results[7]) == "seven"
        assert most == 4 and names <= {f"worker-q_{i}" for i in range(4)}
        assert wakeups < 40 and wakeups == 1
        runner.shutdown()

    asyncio.run(main())


def test_stop_iteration_becomes_a_runtime_error() -> None:
    """A processor raising StopIteration (which a future cannot carry)
    fails with a RuntimeError naming it, instead of hanging its job."""

    def stop(_: Any) -> None:
        raise StopIteration("done")

    async def main() -> None:
        runner = ThreadRunner(asyncio.get_running_loop(), 1, "t")
        with pytest.raises(RuntimeError, match="StopIteration"):
            await asyncio.wait_for(runner.submit(stop, None), 5)
        runner.shutdown()

    asyncio.run(main())


def test_shutdown_cancels_calls_not_started_and_ends_the_threads() -> None:
    """Calls still queued at shutdown are cancelled and never run; the call
    running finishes; the threads then end."""
    release = threading.Event()
    ran: list[int] = []

    def work(n: int) -> int:
        ran.append(n)
        release.wait(5)
        return n

    async def main() -> None:
        runner = ThreadRunner(asyncio.get_running_loop(), 1, "t")
        first = runner.submit(work, 1)
        queued = [runner.submit(work, n) for n in (2, 3)]
        while not ran:
            await asyncio.sleep(0.01)
        runner.shutdown()
        assert all(f.cancelled() for f in queued)
        release.set()
        assert await asyncio.wait_for(first, 5) == 1
        for thread in runner._threads:
            thread.join(5)
            assert not thread.is_alive()
        assert ran == [1]

    asyncio.run(main())


def test_a_call_whose_waiter_was_cancelled_is_dropped() -> None:
    """A job whose await was cancelled (the worker gave up on it) does not
    break the hand-back of the others when its call ends."""
    release = threading.Event()
    started = threading.Event()

    def slow(_: Any) -> str:
        started.set()
        release.wait(5)
        return "late"

    async def main() -> None:
        runner = ThreadRunner(asyncio.get_running_loop(), 2, "t")
        abandoned = runner.submit(slow, None)
        assert await asyncio.to_thread(started.wait, 5)
        abandoned.cancel()  # while it runs
        other = runner.submit(lambda _: "ok", None)
        assert await asyncio.wait_for(other, 5) == "ok"
        release.set()
        await asyncio.sleep(0.1)
        assert abandoned.cancelled()
        assert await asyncio.wait_for(runner.submit(lambda _: "next", None), 5) == (
            "next"
        )
        runner.shutdown()

    asyncio.run(main())
