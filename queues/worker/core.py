"""`AsyncWorker`: the asyncio core of a worker.

One event loop runs everything: claiming jobs (BZPOPMIN on the marker, no
polling), finishing them in batches that also claim the next ones, renewing
all locks in one call, and the stalled-job check. A plain `def` processor
runs in a thread pool so it never starves lock renewal.
"""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import AskError, MovedError
from redis.exceptions import ConnectionError as RedisConnectionError

from .. import codec, defaults, ops
from ..attempts import AttemptHistory
from ..cluster import is_cluster_client
from ..connection import (
    ConnectionLike,
    sent_once_client,
    worker_client,
)
from ..drive import run_async
from ..job import Job
from ..metrics import MetricsOptions
from ..options import BackoffStrategy
from ..outages import Outage, recoverable
from ..queue import AsyncQueue, Queue
from ..scripts import Scripts
from ..telemetry import Telemetry, WorkerTelemetry
from .closing import Closing
from .failures import FailureHandling
from .hooks import Listener, WorkerHooks
from .maintenance import Maintenance
from .processing import Processing
from .reporting import DEFAULT_HISTORY, WorkerReports, attempt_recorder
from .support import (
    Processor,
    blocking_client,
    blocking_connection_name,
    check_options,
    log,
)
from .threads import ThreadRunner


class AsyncWorker(Closing, FailureHandling, Maintenance, Processing):
    """Process jobs of one queue with an asyncio event loop."""

    def __init__(
        self,
        name: str,
        processor: Processor,
        connection: ConnectionLike = None,
        prefix: str = defaults.PREFIX,
        concurrency: int = 1,
        limiter: Mapping[str, int] | None = None,
        lock_duration: int = defaults.LOCK_DURATION_MS,
        stalled_interval: int = defaults.STALLED_INTERVAL_MS,
        max_stalled_count: int = defaults.MAX_STALLED_COUNT,
        worker_name: str | None = None,
        remove_on_complete: Any = None,
        remove_on_fail: Any = None,
        backoff_strategy: BackoffStrategy | None = None,
        drain_delay: float = defaults.DRAIN_DELAY_S,
        close_timeout: float = defaults.CLOSE_TIMEOUT_S,
        metrics: MetricsOptions | None = None,
        telemetry: Telemetry | None = None,
        attempt_history: AttemptHistory | None = DEFAULT_HISTORY,
    ) -> None:
        check_options(processor, concurrency, limiter, metrics)
        self.name = name
        self.processor = processor
        # An async def, or an object whose __call__ is one.
        self.is_async = inspect.iscoroutinefunction(
            processor
        ) or inspect.iscoroutinefunction(type(processor).__call__)
        self.connection = connection
        self.concurrency = concurrency
        self.limiter = dict(limiter) if limiter else None
        self.lock_duration = lock_duration
        self.stalled_interval = stalled_interval
        self.max_stalled_count = max_stalled_count
        self.worker_name = worker_name
        self.remove_on_complete = remove_on_complete
        self.remove_on_fail = remove_on_fail
        self.backoff_strategy = backoff_strategy
        self.drain_delay = drain_delay
        self.close_timeout = close_timeout
        self.metrics = metrics
        self.id = uuid.uuid4().hex
        pool_size = concurrency + defaults.WORKER_POOL_SPARE
        self.queue = AsyncQueue(name, worker_client(connection, pool_size), prefix)
        # Claims and finishes go where redis-py never re-sends a command.
        self._once = Scripts(sent_once_client(self.queue.client))
        self._outage = Outage(f"worker {name}", log)
        self.keys = self.queue.keys
        self._claim_keys = self.keys.move_to_active_keys()
        self._finish_keys = self.keys.move_to_finished_keys()
        static: dict[str, Any] = {"token": self.id, "lockDuration": lock_duration}
        if self.limiter:
            static["limiter"] = self.limiter
        if worker_name:
            static["name"] = worker_name
        if metrics is not None:
            static["maxMetricsSize"] = metrics.max_data_points
        self._static_opts = codec.dumps(static)[1:]
        self._sync_queue: Queue | None = None
        self._threads: ThreadRunner | None = None
        self._bclient: aioredis.Redis | None = None
        self._running: dict[str, Job] = {}
        self._finished: list[dict[str, Any]] = []
        self._saving: list[dict[str, Any]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._seq = 0
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._force = False
        self._closed: asyncio.Event | None = None
        self._drained = False
        self._block_until = 0.0
        self._limited_until = 0.0
        self.processed = 0
        self.failed = 0
        self.hooks = WorkerHooks(worker_name or name)
        self.telemetry = WorkerTelemetry(name, worker_name, telemetry)
        self._reports = WorkerReports(
            self.hooks,
            self.telemetry,
            attempt_recorder(attempt_history, self.queue, worker_name or self.id),
        )
        #: Jobs still running when close() gave up on them (close_timeout,
        #: or force): the stalled check returns them to wait.
        self.abandoned = 0

    # --- public -----------------------------------------------------------
    @property
    def closing(self) -> bool:
        """Whether close() was called (the worker no longer claims jobs)."""
        return self._closing

    @property
    def running_jobs(self) -> list[Job]:
        """Jobs this worker is processing now."""
        return list(self._running.values())

    def on(self, event: str, listener: Listener | None = None) -> Any:
        """Call `listener` on a worker event (see queues.worker.hooks); without
        a listener, a decorator. Returns the listener."""
        return self.hooks.on(event, listener)

    def off(self, event: str, listener: Listener) -> None:
        """Stop calling `listener` on `event`."""
        self.hooks.off(event, listener)

    def claim_capacity(self) -> int:
        """How many more jobs may be claimed now; override to gate claims
        (the GPU worker admits by VRAM budget). Re-asked whenever a job ends."""
        return self.concurrency - len(self._running)

    def wake(self) -> None:
        """Make the loop re-check `claim_capacity()` (call after freeing capacity)."""
        if self._wake is not None:
            self._wake.set()

    async def run(self, install_signals: bool = True) -> None:
        """Process jobs until `close()` (or SIGTERM/SIGINT when installed)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._wake = asyncio.Event()
        self._closed = asyncio.Event()
        self.hooks.bind(loop)
        self._reports.started()
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.close)
        if not self.is_async:
            self._threads = ThreadRunner(loop, self.concurrency, f"worker-{self.name}")
        self._stopping = asyncio.Event()
        helpers = [
            asyncio.create_task(self._lock_renewal_loop()),
            asyncio.create_task(self._stalled_check_loop()),
        ]
        try:
            try:
                # Open the named connection now: Node's getWorkers() lists
                # it, and a busy worker may not block for a long time.
                await (await self._open_blocking()).ping()
                await self._once.client.ping()  # the first claim is not late
            except Exception as exc:
                if not recoverable(exc):
                    raise
            await self._main_loop()
            await self._drain_running()
        finally:
            # Helpers stop at their next tick; a cancellation that redis-py
            # loses mid-command must not hang close(), so waits are bounded.
            self._stopping.set()
            _, pending = await asyncio.wait(helpers, timeout=defaults.HELPER_STOP_S)
            for task in pending:
                task.cancel()
            if (
                install_signals
                and threading.current_thread() is threading.main_thread()
            ):
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            await self._shutdown_clients()
            await self._reports.stopped(defaults.HOOKS_STOP_S)
            self._closed.set()

    def close(self, force: bool = False) -> None:
        """Stop claiming; running jobs finish (up to close_timeout); run()
        returns. With `force`, run() returns at once: running jobs are left
        to the stalled check, as BullMQ's `worker.close(true)`."""
        first = not self._closing
        self._closing = True
        self._force = self._force or force
        if self._wake is not None:
            self._wake.set()
        if first:
            self.hooks.emit("closing")

    # --- the loop -------------------------------------------------------------
    def _worker_opts(self, fetch: int = 0) -> str:
        # The static part is encoded once (run()); only seq and fetch vary.
        return f'{{"seq":{self._seq},"fetch":{fetch},{self._static_opts}'

    async def _main_loop(self) -> None:
        assert self._wake is not None
        block_task: asyncio.Task[Any] | None = None
        try:
            while not self._closing:
                self._wake.clear()
                try:
                    if self._finished:
                        await self._flush()
                    elif self.claim_capacity() <= 0:
                        await self._wake.wait()
                    elif self._limited_until > time.time() * 1000:
                        await self._sleep_or_wake(
                            self._limited_until / 1000 - time.time()
                        )
                    elif not self._drained:
                        await self._fetch()
                    else:
                        block_task = await self._wait_for_job(block_task)
                except Exception as exc:
                    if not recoverable(exc):
                        raise
                    self._reports.error(exc)
                    delay = self._outage.failed(exc)
                    if block_task is not None:
                        block_task.cancel()
                        block_task = None
                    self._drained = False
                    await self._sleep_or_wake(delay)
        finally:
            if block_task is not None:
                block_task.cancel()
                await asyncio.wait([block_task], timeout=defaults.HELPER_STOP_S)

    async def _sleep_or_wake(self, seconds: float) -> None:
        assert self._wake is not None
        try:
            await asyncio.wait_for(self._wake.wait(), max(seconds, 0))
        except TimeoutError:
            pass

    async def _wait_for_job(self, block_task: asyncio.Task[Any] | None) -> Any:
        """Block on the marker (and on finishing jobs / the next delayed due time)."""
        assert self._wake is not None
        now = time.time() * 1000
        if self._block_until and self._block_until <= now:
            self._block_until = 0
            self._drained = False
            return block_task
        if block_task is None:
            block_task = asyncio.ensure_future(self._block())
        wake = asyncio.create_task(self._wake.wait())
        timeout = (self._block_until - now) / 1000 if self._block_until else None
        done, _ = await asyncio.wait(
            {block_task, wake}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        wake.cancel()
        if block_task in done:
            popped = block_task.result()
            block_task = None
            score = float(popped[2]) if popped else 0.0
            if score > time.time() * 1000 + 1:
                if not self._block_until or score < self._block_until:
                    self._block_until = score
            else:
                self._drained = False
        elif not done:
            self._block_until = 0
            self._drained = False
        return block_task

    async def _block(self) -> Any:
        """BZPOPMIN on the marker. On a cluster, a moved slot (MOVED, primary
        gone) drops the blocking client, made again next time; nothing popped."""
        client = self._bclient or await self._open_blocking()
        try:
            return await client.bzpopmin(self.keys.marker, self.drain_delay)
        except (MovedError, AskError, RedisConnectionError):
            if not is_cluster_client(self.queue.client):
                raise
            self._bclient = None
            await client.aclose()
            return None

    async def _open_blocking(self) -> Any:
        name = blocking_connection_name(self.keys.prefix, self.name, self.worker_name)
        self._bclient = await blocking_client(self.queue.client, self.keys.marker, name)
        return self._bclient

    def _take_claimed(self, flat: list[Any], ttl: Any, next_delay: Any) -> None:
        self._seq += len(flat) // 3
        for i in range(0, len(flat), 3):
            job = self._make_job(flat[i], codec.pairs_to_dict(flat[i + 2]))
            job.token = flat[i + 1]
            self._start(job)
        ttl = int(ttl or 0)
        if ttl > 0:
            self._reports.rate_limited(ttl)
            self._limited_until = time.time() * 1000 + min(
                ttl, defaults.RATE_LIMIT_MAX_DELAY_MS
            )
            # Rate limited, not drained: claim directly once the window ends,
            # as no marker is written when it does.
            self._drained = False
        elif not flat:
            self._drained = True
            self._reports.nothing_to_claim()
            next_delay = float(next_delay or 0)
            if next_delay > 0:
                self._block_until = next_delay

    async def _fetch(self) -> None:
        count = min(self.claim_capacity(), defaults.FETCH_BATCH_MAX)
        claim = ops.claim(
            self._claim_keys,
            self.keys.base,
            int(time.time() * 1000),
            self._worker_opts(),
            count,
        )
        flat, ttl, next_delay = await run_async(
            claim, self._once.client, self._once, refusals_as_unavailable=False
        )
        # Only a claim or a finish ends an outage: reads (and a script with
        # nothing to write) may succeed while Redis still refuses writes.
        self._outage.succeeded()
        self._take_claimed(flat, ttl, next_delay)

    async def _flush(self) -> None:
        entries, self._finished = self._finished, []
        self._saving = entries  # their locks are renewed until saved
        fetch = 0
        if not self._closing and self._limited_until <= time.time() * 1000:
            fetch = max(min(self.claim_capacity(), defaults.FETCH_BATCH_MAX), 0)
        finish = ops.finish(
            self._finish_keys,
            self.keys.base,
            int(time.time() * 1000),
            self._worker_opts(fetch),
            codec.dumps(entries),
        )
        try:
            codes, flat, ttl, next_delay = await run_async(
                finish, self._once.client, self._once, refusals_as_unavailable=False
            )
        except Exception:
            self._finished = entries + self._finished
            raise
        finally:
            self._saving = []
        self._outage.succeeded()
        for entry, code in zip(entries, codes):
            if code != 0:
                log.warning(
                    "worker %s: job %s finished as %s but was not saved "
                    "(code %s: its lock was lost or it was moved)",
                    self.name,
                    entry["id"],
                    entry["target"],
                    code,
                )
        self._reports.saved(entries, codes)
        if fetch:
            self._take_claimed(flat, ttl, next_delay)
