"""`Worker`: the blocking twin of AsyncWorker."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ..eventloop import run
from .core import AsyncWorker
from .support import Processor


class Worker:
    """A worker whose `run()` blocks until `close()` or SIGTERM/SIGINT."""

    def __init__(self, name: str, processor: Processor, **options: Any) -> None:
        self._core = AsyncWorker(name, processor, **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._core, attr)

    def run(self) -> None:
        """Process jobs until closed (on uvloop where installed: eventloop.py)."""

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._started.set()
            await self._core.run()

        run(main())

    def close(self, force: bool = False) -> None:
        """Ask the worker to stop (safe from any thread); `force`: at once,
        leaving running jobs to the stalled check (see AsyncWorker.close)."""
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._core.close, force)
        else:
            self._core.close(force)
