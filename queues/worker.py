"""Workers: `AsyncWorker` (the asyncio core) and `Worker` (its blocking twin).

One event loop runs everything: claiming jobs (BZPOPMIN on the marker, no
polling), finishing them in batches that also claim the next ones, renewing
all locks in one call, and the stalled-job check. A plain `def` processor
runs in a thread pool so it never starves lock renewal.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import logging
import signal
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.exceptions import BusyLoadingError, ResponseError

from . import codec, defaults
from .connection import ConnectionLike, async_client, sibling_async_client
from .exceptions import UnrecoverableError
from .job import Job
from .options import BackoffStrategy, backoff_delay, keep_jobs
from .queue import AsyncQueue, Queue

log = logging.getLogger("queues.worker")

Processor = Callable[[Job], Any]
_TRANSIENT = (RedisConnectionError, RedisTimeoutError, BusyLoadingError, OSError)


def _transient(exc: BaseException) -> bool:
    """Whether a Redis error means "not now": the server is unreachable, or
    answers BUSY while another client's script runs too long."""
    if isinstance(exc, _TRANSIENT):
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith("BUSY ")


def _text(value: str) -> str:
    """`value` made encodable as UTF-8 (a lone surrogate, as from undecodable
    bytes, becomes a \\udcxx escape), so the failure it describes can be saved."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def blocking_connection_name(prefix: str, queue: str, worker_name: str | None) -> str:
    """BullMQ's name for a worker connection, which Node's getWorkers() lists."""
    encoded = base64.b64encode(queue.encode()).decode()
    name = f"{prefix}:{encoded}"
    return f"{name}:w:{worker_name}" if worker_name else name


class AsyncWorker:
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
    ) -> None:
        if not callable(processor):
            raise TypeError("processor must be callable")
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if limiter is not None and not (limiter.get("max", 0) >= 1
                                        and limiter.get("duration", 0) >= 1):
            raise ValueError("limiter needs max >= 1 and duration >= 1 (ms)")
        self.name = name
        self.processor = processor
        self.is_async = inspect.iscoroutinefunction(processor) or inspect.iscoroutinefunction(
            getattr(processor, "__call__", None))
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
        self.id = uuid.uuid4().hex
        self.queue = AsyncQueue(name, async_client(connection), prefix)
        self.keys = self.queue.keys
        self._sync_queue: Queue | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._bclient: aioredis.Redis | None = None
        self._running: dict[str, Job] = {}
        self._finished: list[dict[str, Any]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._seq = 0
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._closed: asyncio.Event | None = None
        self._drained = False
        self._block_until = 0.0
        self._limited_until = 0.0
        self.processed = 0
        self.failed = 0

    # --- public -----------------------------------------------------------
    @property
    def closing(self) -> bool:
        """Whether close() was called (the worker no longer claims jobs)."""
        return self._closing

    @property
    def running_jobs(self) -> list[Job]:
        """Jobs this worker is processing now."""
        return list(self._running.values())

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
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.close)
        if not self.is_async:
            self._executor = ThreadPoolExecutor(self.concurrency,
                                                thread_name_prefix=f"worker-{self.name}")
        self._bclient = sibling_async_client(
            self.queue.client, socket_timeout=None,
            client_name=blocking_connection_name(self.keys.prefix, self.name,
                                                 self.worker_name))
        self._stopping = asyncio.Event()
        helpers = [asyncio.create_task(self._lock_renewal_loop()),
                   asyncio.create_task(self._stalled_check_loop())]
        try:
            try:
                # Open the named connection now: Node's getWorkers() lists
                # connections, and a busy worker may not block for a long time.
                await self._bclient.ping()
            except _TRANSIENT:
                pass
            await self._main_loop()
            await self._drain_running()
        finally:
            # Helpers stop at their next tick; a cancellation that redis-py
            # loses mid-command must not hang close(), so waits are bounded.
            self._stopping.set()
            _, pending = await asyncio.wait(helpers, timeout=defaults.HELPER_STOP_S)
            for task in pending:
                task.cancel()
            if install_signals and threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            await self._shutdown_clients()
            self._closed.set()

    def close(self) -> None:
        """Stop taking jobs; running jobs finish (up to close_timeout), then run() returns."""
        self._closing = True
        if self._wake is not None:
            self._wake.set()

    # --- the loop -------------------------------------------------------------
    def _worker_opts(self, fetch: int = 0) -> str:
        opts: dict[str, Any] = {"token": self.id, "seq": self._seq,
                                "lockDuration": self.lock_duration, "fetch": fetch}
        if self.limiter:
            opts["limiter"] = self.limiter
        if self.worker_name:
            opts["name"] = self.worker_name
        return codec.dumps(opts)

    def _claim_keys(self) -> tuple[str, ...]:
        k = self.keys
        return (k.wait, k.active, k.prioritized, k.events, k.limiter, k.delayed, k.meta,
                k.pc, k.marker)

    async def _main_loop(self) -> None:
        assert self._wake is not None
        block_task: asyncio.Task[Any] | None = None
        failures = 0
        try:
            while not self._closing:
                self._wake.clear()
                try:
                    if self._finished:
                        await self._flush()
                    elif self.claim_capacity() <= 0:
                        await self._wake.wait()
                    elif self._limited_until > time.time() * 1000:
                        await self._sleep_or_wake(self._limited_until / 1000 - time.time())
                    elif not self._drained:
                        await self._fetch()
                    else:
                        block_task = await self._wait_for_job(block_task)
                    failures = 0
                except Exception as exc:
                    if not _transient(exc):
                        raise
                    failures += 1
                    delay = min(0.1 * 2 ** min(failures, 6), defaults.RECONNECT_DELAY_MAX_S)
                    log.warning("worker %s: redis unavailable (%s); retrying in %.1fs",
                                self.name, exc, delay)
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
        except asyncio.TimeoutError:
            pass

    async def _wait_for_job(self, block_task: asyncio.Task[Any] | None) -> Any:
        """Block on the marker (and on finishing jobs / the next delayed due time)."""
        assert self._wake is not None and self._bclient is not None
        now = time.time() * 1000
        if self._block_until and self._block_until <= now:
            self._block_until = 0
            self._drained = False
            return block_task
        if block_task is None:
            block_task = asyncio.create_task(
                self._bclient.bzpopmin(self.keys.marker, self.drain_delay))
        wake = asyncio.create_task(self._wake.wait())
        timeout = (self._block_until - now) / 1000 if self._block_until else None
        done, _ = await asyncio.wait({block_task, wake}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
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

    def _take_claimed(self, flat: list[Any], ttl: Any, next_delay: Any) -> None:
        self._seq += len(flat) // 3
        for i in range(0, len(flat), 3):
            job = self._make_job(flat[i], codec.pairs_to_dict(flat[i + 2]))
            job.token = flat[i + 1]
            self._start(job)
        ttl = int(ttl or 0)
        if ttl > 0:
            self._limited_until = time.time() * 1000 + min(ttl, defaults.RATE_LIMIT_MAX_DELAY_MS)
            # Rate limited, not drained: claim directly once the window ends,
            # as no marker is written when it does.
            self._drained = False
        elif not flat:
            self._drained = True
            next_delay = float(next_delay or 0)
            if next_delay > 0:
                self._block_until = next_delay

    async def _fetch(self) -> None:
        count = min(self.claim_capacity(), defaults.FETCH_BATCH_MAX)
        flat, ttl, next_delay = await self.queue.scripts.move_to_active(
            self._claim_keys(),
            (self.keys.base, int(time.time() * 1000), self._worker_opts(), count))
        self._take_claimed(flat, ttl, next_delay)

    async def _flush(self) -> None:
        entries, self._finished = self._finished, []
        fetch = 0
        if not self._closing and self._limited_until <= time.time() * 1000:
            fetch = max(min(self.claim_capacity(), defaults.FETCH_BATCH_MAX), 0)
        k = self.keys
        try:
            codes, flat, ttl, next_delay = await self.queue.scripts.move_to_finished(
                self._claim_keys() + (k.stalled, k.completed, k.failed),
                (k.base, int(time.time() * 1000), self._worker_opts(fetch),
                 codec.dumps(entries)))
        except Exception:
            self._finished = entries + self._finished
            raise
        for entry, code in zip(entries, codes):
            if code != 0:
                log.warning("worker %s: job %s finished as %s but was not saved "
                            "(code %s: its lock was lost or it was moved)",
                            self.name, entry["id"], entry["target"], code)
        if fetch:
            self._take_claimed(flat, ttl, next_delay)

    # --- processing ----------------------------------------------------------
    def _make_job(self, job_id: str, h: dict[str, str]) -> Job:
        if self.is_async:
            return Job.from_hash(self.queue, job_id, h)
        if self._sync_queue is None:
            self._sync_queue = Queue(self.name, self.queue.client, self.keys.prefix)
        return Job.from_hash(self._sync_queue, job_id, h)

    def _start(self, job: Job) -> None:
        self._running[job.id] = job
        task = asyncio.create_task(self._process(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _process(self, job: Job) -> None:
        entry: dict[str, Any] | None = None
        try:
            try:
                if job.repeat_job_key:
                    await self._schedule_next_iteration(job)
                if job.deferred_failure:
                    raise UnrecoverableError(job.deferred_failure)
                if job.malformed:
                    raise UnrecoverableError(job.malformed)
                if self.is_async:
                    result = await self.processor(job)
                else:
                    loop = asyncio.get_running_loop()
                    result = await loop.run_in_executor(self._executor, self.processor, job)
                try:
                    value = codec.dumps(result)
                except TypeError as exc:
                    raise UnrecoverableError(
                        f"return value is not JSON serializable: {exc}") from exc
                self.processed += 1
                entry = {"id": job.id, "token": job.token, "target": "completed",
                         "value": value, "attempts": job.opts.get("attempts", 0),
                         "keep": keep_jobs(job.opts.get("removeOnComplete"),
                                           self.remove_on_complete)}
            except Exception as exc:  # noqa: BLE001 - any processor error fails the job
                try:
                    entry = await self._on_failure(job, exc)
                except Exception as bug:  # noqa: BLE001 - never strand a job in active
                    log.exception("worker %s: handling the failure of job %s failed",
                                  self.name, job.id)
                    entry = {"id": job.id, "token": job.token, "target": "failed",
                             "value": _text(f"{exc} (and then: {bug})"),
                             "attempts": 0, "keep": {"count": -1}}
        finally:
            self._running.pop(job.id, None)
            if entry is not None:
                self._finished.append(entry)
            if self._wake is not None:
                self._wake.set()

    async def _schedule_next_iteration(self, job: Job) -> None:
        """A job scheduler's iteration was taken: add the next one, as Node's
        worker does, so a schedule keeps running with any mix of workers."""
        try:
            await self.queue.schedule_next_iteration(job)
        except Exception as exc:  # noqa: BLE001 - the current iteration still runs
            log.warning("worker %s: next iteration of job scheduler %s not added (%s)",
                        self.name, job.repeat_job_key, exc)

    async def _on_failure(self, job: Job, exc: BaseException) -> dict[str, Any] | None:
        """Retry the job (now or after backoff) or return its final failure entry."""
        self.failed += 1
        reason = _text(str(exc) or type(exc).__name__)
        limit = job.opts.get("stackTraceLimit", defaults.STACKTRACE_LIMIT)
        trace = job.stacktrace + ["".join(traceback.format_exception(exc))]
        trace = trace[-limit:] if limit else []
        trace = [_text(t) if isinstance(t, str) else t for t in trace]
        fields = ["failedReason", reason, "stacktrace", codec.dumps(trace)]
        if job.malformed:
            fields += job.repair_fields()
        attempts_made = job.attempts_made + 1
        first_line = " ".join(str(exc).split()) or "-"
        log.warning("job %s (%s) failed on attempt %d of %d: %s: %s", job.id, job.name,
                    attempts_made, job.attempts, type(exc).__name__, first_line)
        if not isinstance(exc, UnrecoverableError) and attempts_made < job.attempts:
            try:
                delay = backoff_delay(job.opts.get("backoff"), attempts_made, exc, job,
                                      self.backoff_strategy)
            except Exception as backoff_exc:  # noqa: BLE001 - a broken strategy fails the job
                delay = -1
                reason = _text(f"{reason} (backoff failed: {backoff_exc})")
                fields[1] = reason
            if delay != -1:
                await self._retry(job, delay, fields)
                return None
        return {"id": job.id, "token": job.token, "target": "failed", "value": reason,
                "fields": fields, "attempts": job.opts.get("attempts", 0),
                "keep": keep_jobs(job.opts.get("removeOnFail"), self.remove_on_fail)}

    async def _retry(self, job: Job, delay: int, fields: list[str]) -> None:
        k = self.keys
        now = int(time.time() * 1000)
        for attempt in range(5):
            try:
                if delay > 0:
                    code = await self.queue.scripts.move_to_delayed(
                        (k.active, k.delayed, k.events, k.meta, k.marker, k.stalled),
                        (k.base, now, job.id, job.token, delay, codec.dumps(fields), "0"))
                else:
                    code = await self.queue.scripts.retry_job(
                        (k.wait, k.active, k.prioritized, k.events, k.delayed, k.meta, k.pc,
                         k.marker, k.stalled),
                        (k.base, now, job.id, job.token, codec.dumps(fields),
                         "1" if job.lifo else "0"))
                if code != 0:
                    log.warning("worker %s: retry of job %s not saved (code %s)",
                                self.name, job.id, code)
                return
            except Exception as exc:
                if not _transient(exc):
                    raise
                log.warning("worker %s: retry of job %s failed (%s)", self.name, job.id, exc)
                await asyncio.sleep(min(0.2 * 2**attempt, 2))
        # Left in active: the stalled check will return it to wait.

    async def _drain_running(self) -> None:
        """After close(): wait for running jobs (up to close_timeout), then flush."""
        deadline = time.monotonic() + self.close_timeout
        while self._tasks and time.monotonic() < deadline:
            await asyncio.wait(set(self._tasks), timeout=deadline - time.monotonic())
        for task in list(self._tasks):
            task.cancel()
        for attempt in range(3):
            if not self._finished:
                break
            try:
                await self._flush()
            except Exception as exc:
                if not _transient(exc):
                    raise
                await asyncio.sleep(0.5)

    # --- locks and stalled jobs ----------------------------------------------
    async def _lock_renewal_loop(self) -> None:
        # A quarter of the lock duration, like BullMQ's timer (lockRenewTime/2):
        # a renewal that fails (Redis busy or unreachable) is retried while
        # the locks still have half their time left.
        interval = self.lock_duration / 4 / 1000
        while not await self._stop_within(interval):
            if not self._running:
                continue
            jobs = list(self._running.values())
            try:
                lost = await self.queue.scripts.extend_locks(
                    (self.keys.stalled,),
                    (self.keys.base, self.lock_duration, codec.dumps([j.id for j in jobs]),
                     codec.dumps([j.token for j in jobs])))
            except Exception as exc:  # noqa: BLE001 - renewal must outlive any error
                log.warning("worker %s: lock renewal failed (%s)", self.name, exc)
                continue
            for job_id in lost:
                log.warning("worker %s: lost the lock of job %s", self.name, job_id)

    async def _stop_within(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True as soon as the worker is shutting down."""
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except asyncio.TimeoutError:
            return False
        return True

    async def _stalled_check_loop(self) -> None:
        k = self.keys
        while not self._stopping.is_set():
            try:
                moved = await self.queue.scripts.move_stalled_jobs_to_wait(
                    (k.stalled, k.wait, k.active, k.stalled_check, k.meta, k.events, k.marker),
                    (k.base, int(time.time() * 1000), self.max_stalled_count,
                     self.stalled_interval))
                if moved:
                    log.warning("worker %s: moved stalled jobs back to wait: %s",
                                self.name, ", ".join(moved))
                    self._drained = False
                    if self._wake is not None:
                        self._wake.set()
            except Exception as exc:  # noqa: BLE001 - the check must outlive any error
                log.warning("worker %s: stalled check failed (%s)", self.name, exc)
            await self._stop_within(self.stalled_interval / 1000)

    async def _shutdown_clients(self) -> None:
        if self._bclient is not None:
            await self._bclient.aclose()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if self._sync_queue is not None:
            self._sync_queue.close()
        await self.queue.close()


class Worker:
    """A worker whose `run()` blocks until `close()` or SIGTERM/SIGINT."""

    def __init__(self, name: str, processor: Processor, **options: Any) -> None:
        self._core = AsyncWorker(name, processor, **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._core, attr)

    def run(self) -> None:
        """Process jobs until closed."""
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._started.set()
            await self._core.run()

        asyncio.run(main())

    def close(self) -> None:
        """Ask the worker to stop (safe from any thread)."""
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._core.close)
        else:
            self._core._closing = True


__all__ = ["AsyncWorker", "Worker", "Processor"]
