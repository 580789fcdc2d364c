"""Workers: `AsyncWorker` (the asyncio core) and `Worker` (its blocking twin).

- `core`: the claim / process / finish loop
- `failures`: retries with backoff and final failures
- `maintenance`: batched lock renewal and the stalled-job check
- `closing`: waiting for running jobs, saving what finished, closing clients
- `sync`: the blocking `Worker`
"""

from __future__ import annotations

from .core import AsyncWorker
from .support import Processor, blocking_connection_name
from .sync import Worker

__all__ = ["AsyncWorker", "Processor", "Worker", "blocking_connection_name"]
