"""Workers: `AsyncWorker` (the asyncio core) and `Worker` (its blocking twin).

`core` has `AsyncWorker` and its loop; each part it holds has a module:

- `policy`: how many jobs it claims (`ClaimPolicy`; `Concurrency` by default),
  and which, where a policy is also a `ClaimGate`
- `claiming`: claims, the rate limit, the blocking wait for a job
- `processing`: running each claimed job in a task of its own
- `finishing`: completions, retries with backoff, failures, saving them
- `locks`, `stalled`, `background`: lock renewal, the stalled-job check,
  and what such background loops share
- `closing`: waiting for running jobs and saving what finished
- `hooks`, `reporting`: its events, telemetry and attempt history
- `sync`: the blocking `Worker`
"""

from __future__ import annotations

from .core import AsyncWorker
from .policy import ClaimGate, ClaimPolicy, Concurrency
from .support import Processor, blocking_connection_name
from .sync import Worker

__all__ = [
    "AsyncWorker",
    "ClaimGate",
    "ClaimPolicy",
    "Concurrency",
    "Processor",
    "Worker",
    "blocking_connection_name",
]
