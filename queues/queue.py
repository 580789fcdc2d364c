"""`Queue` (sync) and `AsyncQueue` (asyncio): one API, two drivers.

Every method builds an operation from `ops` and hands it to `_run`, which the
sync class executes at once and the async class returns as an awaitable, so
`queue.add(...)` and `await aqueue.add(...)` share one implementation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import redis
import redis.asyncio as aioredis

from . import clients, codec, defaults, drive, metrics, ops
from .connection import ConnectionLike, async_client, sync_client
from .exceptions import InvalidJobOptions
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
from .scheduler import JobSchedulerMethods
from .scripts import Scripts
from .state import JobState, parse_state


class _QueueBase(JobReads, JobSchedulerMethods):
    """The queue API shared by `Queue` and `AsyncQueue`."""

    client: Any
    scripts: Scripts

    def __init__(
        self,
        name: str,
        prefix: str = defaults.PREFIX,
        default_job_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = check_queue_name(name)
        self.prefix = prefix
        self.keys = QueueKeys(name, prefix)
        self._job_defaults = check_default_job_options(default_job_options)

    @property
    def default_job_options(self) -> dict[str, Any]:
        """The options every `add` of this queue starts from (a copy)."""
        return dict(self._job_defaults)

    def _run(self, op: ops.Op) -> Any:
        raise NotImplementedError

    def _job(
        self,
        job_id: str,
        h: Mapping[str, str],
        left_out: dict[str, int] | None = None,
    ) -> Job:
        return Job.from_hash(self, job_id, dict(h), left_out)

    # --- adding ---------------------------------------------------------
    def _prepare(
        self, name: str, data: Any, options: dict[str, Any]
    ) -> tuple[ops.Eval, Job]:
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
            self,
            "",
            name=name,
            data=data,
            opts=decode_opts(opts),
            timestamp=timestamp,
            delay=opts.get("delay", 0),
            priority=opts.get("priority", 0),
        )
        return call, job

    def add(self, name: str, data: Any = None, **options: Any) -> Any:
        """Add a job; options: job_id, priority, delay, lifo, attempts, backoff,
        remove_on_complete, remove_on_fail, timestamp, stack_trace_limit,
        keep_logs, size_limit, deduplication={id, ttl?, extend?, replace?,
        keep_last_if_active?}, and the flow failure flags, each over the
        queue's `default_job_options`. Returns the Job (a deduplicated add
        returns the Job with the owner's id)."""
        call, job = self._prepare(name, data, options)

        def op() -> ops.Op:
            job.id = yield call
            return job

        return self._run(op())

    def add_bulk(self, jobs: Iterable[Mapping[str, Any]]) -> Any:
        """Add many jobs in one round trip; each item is {name, data, opts?}."""
        prepared = [
            self._prepare(j["name"], j.get("data"), dict(j.get("opts") or {}))
            for j in jobs
        ]

        def op() -> ops.Op:
            if not prepared:
                return []
            ids = yield [call for call, _ in prepared]
            for (_, job), job_id in zip(prepared, ids):
                job.id = job_id
            return [job for _, job in prepared]

        return self._run(op())

    # --- reading (more in JobReads) ------------------------------------
    def get_counts(self, *states: str | JobState) -> Any:
        """Counts per state ({"waiting": n, ...}); default states when none given."""
        return self._run(ops.get_counts(self.keys, states))

    def get_job_state(self, job_id: str) -> Any:
        """The JobState of a job (UNKNOWN when it is nowhere)."""
        return self._run(ops.get_state(self.keys, job_id))

    def get_job_logs(
        self, job_id: str, start: int = 0, end: int = -1, asc: bool = True
    ) -> Any:
        """(lines, total count) of a job's log."""
        key = self.keys.logs(job_id)

        def op() -> ops.Op:
            if asc:
                lines, count = yield [
                    ops.Cmd(("LRANGE", key, start, end)),
                    ops.Cmd(("LLEN", key)),
                ]
            else:
                lines, count = yield [
                    ops.Cmd(("LRANGE", key, -end - 1, -start - 1)),
                    ops.Cmd(("LLEN", key)),
                ]
                lines = list(reversed(lines))
            return lines, int(count)

        return self._run(op())

    def get_meta(self) -> Any:
        """The queue's meta hash as stored."""

        def op() -> ops.Op:
            return (yield ops.Cmd(("HGETALL", self.keys.meta)))

        return self._run(op())

    def is_paused(self) -> Any:
        """Whether the queue is paused."""

        def op() -> ops.Op:
            return bool((yield ops.Cmd(("HEXISTS", self.keys.meta, "paused"))))

        return self._run(op())

    def get_metrics(self, target: str | JobState, start: int = 0, end: int = -1) -> Any:
        """The Metrics of `completed` or `failed` jobs that workers with the
        `metrics` option collect: per-minute counts from `start` to `end`
        (0 is the newest minute), as Node's getMetrics."""
        return self._run(metrics.get_metrics(self.keys, target, start, end))

    def get_workers(self) -> Any:
        """The connected workers of this queue (Node or Bullpen) as Node's
        getWorkers(): one dict of CLIENT LIST fields each, `name` = the queue
        name, `rawname` = the connection name; [] when CLIENT LIST is refused."""
        return self._run(clients.get_workers(self.keys))

    def get_workers_count(self) -> Any:
        """How many workers get_workers() lists."""

        def op() -> ops.Op:
            return len((yield from clients.get_workers(self.keys)))

        return self._run(op())

    # --- queue actions --------------------------------------------------
    def pause(self) -> Any:
        """Stop workers taking jobs; jobs stay in wait (BullMQ 6)."""
        return self._run(ops.pause(self.keys, True))

    def resume(self) -> Any:
        """Let workers take jobs again, migrating a legacy `paused` list."""
        return self._run(ops.pause(self.keys, False))

    def drain(self, delayed: bool = False) -> Any:
        """Delete waiting and prioritized jobs (and delayed ones when asked)."""

        def op() -> ops.Op:
            k = self.keys
            return (
                yield ops.Eval(
                    "drain",
                    (k.wait, k.paused, k.prioritized, k.delayed, k.pc),
                    (k.base, "1" if delayed else "0"),
                )
            )

        return self._run(op())

    def clean(
        self, grace_ms: int, limit: int = 0, state: str | JobState = "completed"
    ) -> Any:
        """Delete jobs of a state older than grace_ms; returns their ids."""
        return self._run(ops.clean(self.keys, grace_ms, limit, state))

    def obliterate(self, force: bool = False) -> Any:
        """Delete the queue and every job in it (force: even with active jobs)."""
        return self._run(ops.obliterate(self.keys, force))

    def retry_jobs(
        self,
        state: str = "failed",
        count: int = defaults.RETRY_BATCH,
        timestamp: int | None = None,
    ) -> Any:
        """Move failed (or completed) jobs finished before timestamp back to wait."""
        if parse_state(state) not in (JobState.FAILED, JobState.COMPLETED):
            raise ValueError("retry_jobs state must be 'failed' or 'completed'")
        return self._run(
            ops.move_jobs_to_wait(self.keys, state, count, timestamp or ops.now_ms())
        )

    def promote_jobs(self, count: int = defaults.RETRY_BATCH) -> Any:
        """Move every delayed job to wait."""
        return self._run(ops.move_jobs_to_wait(self.keys, "delayed", count, "+inf"))

    def remove_job(self, job_id: str, remove_children: bool = True) -> Any:
        """Remove one job and, unless remove_children is False, its children in
        any queue of the prefix; False when it does not exist. JobLocked when
        the job or a pending child is locked (then nothing is removed)."""
        return self._run(ops.remove(self.keys, job_id, remove_children))

    def _meta_op(self, *command: Any) -> Any:
        def op() -> ops.Op:
            yield ops.Cmd(command)
            return None

        return self._run(op())

    def set_global_concurrency(self, concurrency: int) -> Any:
        """At most this many active jobs across all workers of the queue."""
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError("global concurrency must be an integer >= 1")
        return self._meta_op("HSET", self.keys.meta, "concurrency", concurrency)

    def remove_global_concurrency(self) -> Any:
        """Lift the global concurrency limit."""
        return self._meta_op("HDEL", self.keys.meta, "concurrency")

    def set_global_rate_limit(self, max_jobs: int, duration_ms: int) -> Any:
        """At most max_jobs jobs started per duration_ms, across all workers."""
        if max_jobs < 1 or duration_ms < 1:
            raise ValueError("rate limit max and duration must be >= 1")
        return self._meta_op(
            "HSET", self.keys.meta, "max", max_jobs, "duration", duration_ms
        )

    def remove_global_rate_limit(self) -> Any:
        """Lift the global rate limit."""
        return self._meta_op("HDEL", self.keys.meta, "max", "duration")

    def _job_op(self, kind: str, job_id: str, *args: Any) -> Any:
        return self._run(ops.job_op(self.keys, kind, job_id, *args))


class Queue(_QueueBase):
    """A BullMQ-compatible queue on a sync redis-py client."""

    def __init__(
        self,
        name: str,
        connection: ConnectionLike = None,
        prefix: str = defaults.PREFIX,
        default_job_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(name, prefix, default_job_options)
        self.client: redis.Redis = sync_client(connection)
        self.scripts = Scripts(self.client)

    def _run(self, op: ops.Op) -> Any:
        return drive.run_sync(op, self.client, self.scripts)

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncQueue(_QueueBase):
    """A BullMQ-compatible queue on an asyncio redis-py client; await its methods."""

    def __init__(
        self,
        name: str,
        connection: ConnectionLike = None,
        prefix: str = defaults.PREFIX,
        default_job_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(name, prefix, default_job_options)
        self.client: aioredis.Redis = async_client(connection)
        self.scripts = Scripts(self.client)

    async def _drive(self, op: ops.Op) -> Any:
        return await drive.run_async(op, self.client, self.scripts)

    def _run(self, op: ops.Op) -> Any:
        return self._drive(op)

    async def close(self) -> None:
        """Close the client's connections."""
        await self.client.aclose()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
