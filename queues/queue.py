"""`Queue` (sync) and `AsyncQueue` (asyncio): one API, two drivers.

Every method builds an operation from `ops`; `op_method` (queues.driver)
hands it to the queue's `drive`, which the sync class runs at once and the
async class returns as an awaitable, so `queue.add(...)` and
`await aqueue.add(...)` share one implementation and each has its precise
type (`Job[Queue]`, `Awaitable[Job[AsyncQueue]]`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, TypeVar, cast

import redis
import redis.asyncio as aioredis

from . import clients, codec, defaults, hotpath, metrics, ops
from .cluster import check_for
from .connection import ConnectionLike, async_client, for_blocking, sync_client
from .drive import run_async, run_sync
from .driver import Driver, op_method
from .durability import Durability
from .exceptions import InvalidJobOptions
from .groups import GroupMethods
from .job import Job
from .keys import QueueKeys
from .names import check_queue_name
from .options import (
    build_opts,
    check_default_job_options,
    decode_opts,
    merge_job_options,
)
from .reads import JobReads
from .scheduler_methods import JobSchedulerMethods
from .scripts import Scripts
from .state import JobState, parse_state

T = TypeVar("T")
#: The concrete queue class: what its jobs are bound to.
Q = TypeVar("Q", bound=Driver)


class _QueueBase(JobReads[Q], JobSchedulerMethods[Q], GroupMethods[Q]):
    """The queue API shared by `Queue` and `AsyncQueue`."""

    client: Any
    scripts: Scripts

    def __init__(
        self,
        name: str,
        prefix: str = defaults.PREFIX,
        default_job_options: Mapping[str, Any] | None = None,
        durability: Durability | None = None,
    ) -> None:
        self.name = check_queue_name(name)
        self.prefix = prefix
        self.keys = QueueKeys(name, prefix)
        self._job_defaults = check_default_job_options(default_job_options)
        if durability is not None and not isinstance(durability, Durability):
            raise TypeError("durability must be a queues.Durability or None")
        #: What an add waits for before it returns (None: the primary's reply).
        self.durability = durability

    def _client_for(self, client: T) -> T:
        """`client`, or a sibling whose read timeout outlasts a durable add's
        WAIT (redis-py would otherwise time out and send the adds again)."""
        if self.durability is None:
            return client
        return cast(T, for_blocking(client, self.durability.wait_s))

    @property
    def default_job_options(self) -> dict[str, Any]:
        """The options every `add` of this queue starts from (a copy)."""
        return dict(self._job_defaults)

    def drive(self, op: ops.Op[T]) -> Any:
        """Run `op` on this queue's client (its result, or an awaitable of it)."""
        raise NotImplementedError

    @property
    def driver(self) -> Q:
        """What runs this queue's ops: the queue itself (see queues.driver)."""
        return cast(Q, self)

    # --- adding ---------------------------------------------------------
    def _prepare(
        self, name: str, data: Any, options: dict[str, Any]
    ) -> tuple[ops.Eval, Job[Q]]:
        if not isinstance(name, str):
            raise InvalidJobOptions("job name must be a string")
        options = merge_job_options(self._job_defaults, options)
        size_limit = options.get("size_limit")
        opts = build_opts(**options)
        data_json = codec.dumps({} if data is None else data)
        if size_limit is not None and len(data_json.encode()) > size_limit:
            raise InvalidJobOptions(
                f"job data is {len(data_json.encode())} bytes, over its size_limit "
                f"of {size_limit}"
            )
        timestamp = int(opts.get("timestamp") or ops.now_ms())
        call = ops.add_call(self.keys, name, data_json, opts, timestamp)
        # The Job holds long option names, as Job.from_hash decodes them.
        job = Job(
            self.driver,
            "",
            name=name,
            data=data,
            opts=decode_opts(opts),
            timestamp=timestamp,
            delay=opts.get("delay", 0),
            priority=opts.get("priority", 0),
        )
        return call, job

    @op_method
    def add(self, /, name: str, data: Any = None, **options: Any) -> ops.Op[Job[Q]]:
        """Add a job; options: job_id, priority, delay, lifo, attempts, backoff,
        remove_on_complete, remove_on_fail, timestamp, stack_trace_limit,
        keep_logs, size_limit, deduplication={id, ttl?, extend?, replace?,
        keep_last_if_active?}, the flow failure flags, and tenant (who queued
        it, for GPU-time accounting: opts.tenant), each over the
        queue's `default_job_options`. Returns the Job (a deduplicated add
        returns the Job with the owner's id); NotDurable when the queue's
        `durability` was not met (the job is stored all the same)."""
        return _added_one(self._prepare(name, data, options), self.durability)

    @op_method
    def add_bulk(self, jobs: Iterable[Mapping[str, Any]]) -> ops.Op[list[Job[Q]]]:
        """Add many jobs in one round trip; each item is {name, data, opts?}.
        NotDurable (naming them all) when the queue's `durability` was not met."""
        prepared = [
            self._prepare(j["name"], j.get("data"), dict(j.get("opts") or {}))
            for j in jobs
        ]
        return _added(prepared, self.durability)

    # --- reading (more in JobReads) ------------------------------------
    @op_method
    def get_counts(self, *states: str | JobState) -> ops.Op[dict[str, int]]:
        """Counts per state ({"waiting": n, ...}); default states when none given."""
        return ops.get_counts(self.keys, states)

    @op_method
    def get_job_state(self, job_id: str) -> ops.Op[JobState]:
        """The JobState of a job (UNKNOWN when it is nowhere)."""
        return ops.get_state(self.keys, job_id)

    @op_method
    def get_job_logs(
        self, job_id: str, start: int = 0, end: int = -1, asc: bool = True
    ) -> ops.Op[tuple[list[str], int]]:
        """(lines, total count) of a job's log."""
        return ops.get_logs(self.keys, job_id, start, end, asc)

    @op_method
    def get_meta(self) -> ops.Op[dict[str, str]]:
        """The queue's meta hash as stored."""
        return _reply(ops.Cmd(("HGETALL", self.keys.meta)))

    @op_method
    def is_paused(self) -> ops.Op[bool]:
        """Whether the queue is paused."""
        return _flag(ops.Cmd(("HEXISTS", self.keys.meta, "paused")))

    @op_method
    def get_metrics(
        self, target: str | JobState, start: int = 0, end: int = -1
    ) -> ops.Op[metrics.Metrics]:
        """The Metrics of `completed` or `failed` jobs that workers with the
        `metrics` option collect: per-minute counts from `start` to `end`
        (0 is the newest minute), as Node's getMetrics."""
        return metrics.get_metrics(self.keys, target, start, end)

    @op_method
    def get_workers(self) -> ops.Op[list[dict[str, str]]]:
        """The connected workers of this queue (Node or Bullpen) as Node's
        getWorkers(): one dict of CLIENT LIST fields each, `name` = the queue
        name, `rawname` = the connection name; [] when CLIENT LIST is refused."""
        return clients.get_workers(self.keys)

    @op_method
    def get_workers_count(self) -> ops.Op[int]:
        """How many workers get_workers() lists."""
        return _count(clients.get_workers(self.keys))

    # --- queue actions --------------------------------------------------
    @op_method
    def pause(self) -> ops.Op[None]:
        """Stop workers taking jobs; jobs stay in wait (BullMQ 6)."""
        return ops.pause(self.keys, True)

    @op_method
    def resume(self) -> ops.Op[None]:
        """Let workers take jobs again, migrating a legacy `paused` list."""
        return ops.pause(self.keys, False)

    @op_method
    def drain(self, delayed: bool = False) -> ops.Op[int]:
        """Delete waiting and prioritized jobs (and delayed ones when asked)."""
        return ops.drain(self.keys, delayed)

    @op_method
    def clean(
        self, grace_ms: int, limit: int = 0, state: str | JobState = "completed"
    ) -> ops.Op[list[str]]:
        """Delete jobs of a state older than grace_ms; returns their ids."""
        return ops.clean(self.keys, grace_ms, limit, state)

    @op_method
    def obliterate(self, force: bool = False) -> ops.Op[None]:
        """Delete the queue and every job in it (force: even with active jobs)."""
        return ops.obliterate(self.keys, force)

    @op_method
    def retry_jobs(
        self,
        state: str = "failed",
        count: int = defaults.RETRY_BATCH,
        timestamp: int | None = None,
    ) -> ops.Op[None]:
        """Move failed (or completed) jobs finished before timestamp back to wait."""
        if parse_state(state) not in (JobState.FAILED, JobState.COMPLETED):
            raise ValueError("retry_jobs state must be 'failed' or 'completed'")
        before = timestamp or ops.now_ms()
        return ops.move_jobs_to_wait(self.keys, state, count, before)

    @op_method
    def promote_jobs(self, count: int = defaults.RETRY_BATCH) -> ops.Op[None]:
        """Move every delayed job to wait."""
        return ops.move_jobs_to_wait(self.keys, "delayed", count, "+inf")

    @op_method
    def remove_job(self, job_id: str, remove_children: bool = True) -> ops.Op[bool]:
        """Remove one job and, unless remove_children is False, its children in
        any queue of the prefix; False when it does not exist. JobLocked when
        the job or a pending child is locked (then nothing is removed)."""
        return ops.remove(self.keys, job_id, remove_children)

    @op_method
    def set_global_concurrency(self, concurrency: int) -> ops.Op[None]:
        """At most this many active jobs across all workers of the queue."""
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError("global concurrency must be an integer >= 1")
        return ops.set_meta(self.keys, "concurrency", concurrency)

    @op_method
    def remove_global_concurrency(self) -> ops.Op[None]:
        """Lift the global concurrency limit."""
        return ops.del_meta(self.keys, "concurrency")

    @op_method
    def set_global_rate_limit(self, max_jobs: int, duration_ms: int) -> ops.Op[None]:
        """At most max_jobs jobs started per duration_ms, across all workers."""
        if max_jobs < 1 or duration_ms < 1:
            raise ValueError("rate limit max and duration must be >= 1")
        return ops.set_meta(self.keys, "max", max_jobs, "duration", duration_ms)

    @op_method
    def remove_global_rate_limit(self) -> ops.Op[None]:
        """Lift the global rate limit."""
        return ops.del_meta(self.keys, "max", "duration")

    @op_method
    def rate_limit(self, expire_ms: int) -> ops.Op[None]:
        """Hold the rate limit full for `expire_ms` ms (BullMQ's
        `queue.rateLimit`, e.g. after an upstream API answered 429): workers
        with a `limiter`, or on a queue with a global rate limit, claim
        nothing until it ends; a processor then raises `RateLimitError` to
        put its job back (docs/queue-api.md)."""
        if isinstance(expire_ms, bool) or not isinstance(expire_ms, int):
            raise TypeError("expire_ms must be an integer (ms)")
        if expire_ms < 1:
            raise ValueError("expire_ms must be >= 1")
        return ops.rate_limit(self.keys, expire_ms)

    @op_method
    def get_rate_limit_ttl(self, max_jobs: int | None = None) -> ops.Op[int]:
        """How many ms the rate limit holds claims still, as BullMQ's
        `getRateLimitTtl`: with `max_jobs` (else the global rate limit's max)
        the limiter's remaining ms once that many jobs were counted, else 0;
        with neither, the limiter's PTTL as it is (-2: none)."""
        if max_jobs is not None and (
            isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1
        ):
            raise ValueError("max_jobs must be an integer >= 1")
        return ops.rate_limit_ttl(self.keys, max_jobs)

    @op_method
    def remove_rate_limit_key(self) -> ops.Op[int]:
        """End the rate limit's current window and any manual limit (BullMQ's
        `removeRateLimitKey`); 1 if there was one."""
        return ops.remove_rate_limit_key(self.keys)


def _added_one(
    prepared: tuple[ops.Eval, Job[Q]], durability: Durability | None
) -> ops.Op[Job[Q]]:
    [job] = yield from _added([prepared], durability)
    return job


def _added(
    prepared: list[tuple[ops.Eval, Job[Q]]], durability: Durability | None
) -> ops.Op[list[Job[Q]]]:
    ids = yield from ops.send_adds([call for call, _ in prepared], durability)
    for (_, job), job_id in zip(prepared, ids):
        job.id = job_id
    return [job for _, job in prepared]


def _reply(request: ops.Cmd) -> ops.Op[Any]:
    return (yield request)


def _flag(request: ops.Cmd) -> ops.Op[bool]:
    return bool((yield request))


def _count(op: ops.Op[list[T]]) -> ops.Op[int]:
    return len((yield from op))


class Queue(_QueueBase["Queue"]):
    """A BullMQ-compatible queue on a sync redis-py client."""

    def __init__(
        self,
        name: str,
        connection: ConnectionLike = None,
        prefix: str = defaults.PREFIX,
        default_job_options: Mapping[str, Any] | None = None,
        durability: Durability | None = None,
    ) -> None:
        super().__init__(name, prefix, default_job_options, durability)
        self.client: redis.Redis = self._client_for(sync_client(connection))
        check_for(self.client, prefix, self.name)
        self.scripts = Scripts(self.client)
        #: The lean path of adds (queues.hotpath), shared by the queues of
        #: one client; None on a cluster.
        self.adds = hotpath.sync_adds(self.client)

    def drive(self, op: ops.Op[T]) -> T:
        """Run `op` on this queue's client; its result."""
        return run_sync(op, self.client, self.scripts, self.adds)

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncQueue(_QueueBase["AsyncQueue"]):
    """A BullMQ-compatible queue on an asyncio redis-py client; await its methods."""

    def __init__(
        self,
        name: str,
        connection: ConnectionLike = None,
        prefix: str = defaults.PREFIX,
        default_job_options: Mapping[str, Any] | None = None,
        durability: Durability | None = None,
        auto_pipeline: bool = True,
    ) -> None:
        super().__init__(name, prefix, default_job_options, durability)
        self.client: aioredis.Redis = self._client_for(async_client(connection))
        check_for(self.client, prefix, self.name)
        self.scripts = Scripts(self.client)
        #: The lean, auto-pipelined path of adds (queues.hotpath), shared by
        #: the queues of one client; None with `auto_pipeline=False`.
        self.adds = hotpath.async_adds(self.client) if auto_pipeline else None

    def drive(self, op: ops.Op[T]) -> Awaitable[T]:
        """Run `op` on this queue's client; an awaitable of its result."""
        return run_async(op, self.client, self.scripts, adds=self.adds)

    async def close(self) -> None:
        """Close the client's connections."""
        if self.adds is not None:
            await self.adds.drain()
        await self.client.aclose()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
