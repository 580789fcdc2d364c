"""The event loop of the runners Bullpen starts itself: `Worker.run()` (so
also `bullpen-worker`) and each GPU worker process.

uvloop (libuv's loop, as Node's, for asyncio) where it is installed, which
it is with Bullpen on Linux and macOS; asyncio's own loop elsewhere. On it a
worker spends 10-15 us less CPU a job at concurrency 1 (about a tenth) and
a tenth less at 50 (bench/throughput.py, which runs its Bullpen worker the
same way; docs/scaling.md). An `AsyncWorker` runs on whatever loop its
caller runs: awaiting it inside `asyncio.run()` keeps asyncio's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory where uvloop is installed, else None (asyncio's)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to its end as asyncio.run() does, on loop_factory()'s loop."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
