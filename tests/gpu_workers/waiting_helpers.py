"""Plain helpers of the waiting-reason tests: each situation built for real in
the test Redis (a queue's own scripts, a connected worker, GPU heartbeats)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from gpu_workers.waiting import WaitingReason, explain
from queues import Job, Queue, ops
from queues.clients import worker_connection_name
from tests.dashboard.helpers import H200_GPU, SIM_GPU, beat

GiB = 2**30
DEMO_HANDLERS = ("gpu_workers.demo_handlers",)


@contextmanager
def connected_worker(redis_url: str, q: Queue) -> Iterator[redis.Redis]:
    """A connection named as a BullMQ worker of `q` names its own (CLIENT
    SETNAME), which is what Node's getWorkers() and the census count."""
    conn = redis.Redis.from_url(redis_url)
    conn.client_setname(worker_connection_name(q.prefix, q.name, "t"))
    try:
        yield conn
    finally:
        conn.close()


def reason_of(
    r: redis.Redis, q: Queue, job_id: str, **kwargs: Any
) -> WaitingReason | None:
    """The waiting reason of one job as the job page asks for it."""
    job, state = q.get_job_with_state(job_id)
    assert job is not None
    kwargs.setdefault("handler_modules", DEMO_HANDLERS)
    return explain(r, q.prefix, q.name, [(job, state.value)], **kwargs).get(job_id)


def codes(reason: WaitingReason) -> list[str]:
    """The primary code, then those of the other reasons that also hold."""
    return [reason.code, *(a.code for a in reason.also)]


def gpu_worker(
    r: redis.Redis,
    q: Queue,
    budget: int,
    committed: int,
    gpu: dict[str, Any] | None = None,
    queue: str | None = None,
    ident: str = "w1",
) -> None:
    """A GPU worker's heartbeat serving `queue` (default `q`'s) with this
    budget and committed VRAM, as gpu_workers/upkeep.py writes it."""
    snap = gpu or SIM_GPU
    beat(
        r,
        "worker",
        ident,
        {
            "id": ident,
            "host": "h1",
            "queue": queue or q.name,
            "prefix": q.prefix,
            "gpu": dict(snap),
            "slots": 3,
            "budget_bytes": budget,
            "committed_bytes": committed,
            "running": [],
            "counters": {},
            "state": "busy",
            "ts_ms": ops.now_ms(),
        },
    )


def big_gpu(r: redis.Redis, q: Queue, queue: str) -> None:
    """An H200 worker with a 138 GiB budget serving another queue."""
    gpu_worker(r, q, 138 * GiB, 0, gpu=H200_GPU, queue=queue, ident="w-big")


def demo_job(q: Queue, vram: str, **options: Any) -> Job[Any]:
    """A `demo` job (gpu_workers.demo_handlers) declaring `vram` in its data."""
    return q.add("demo", {"vram": vram}, **options)


def push_ids(r: redis.Redis, q: Queue, n: int, tag: str = "x") -> None:
    """LPUSH `n` bare ids (no job hash) on `q`'s wait list, at the back of the
    line, in one pipelined round trip: a long line costs no job hashes."""
    pipe = r.pipeline(transaction=False)
    for start in range(0, n, 10_000):
        pipe.lpush(
            q.keys.wait, *(f"{tag}{i}" for i in range(start, min(n, start + 10_000)))
        )
    pipe.execute()
