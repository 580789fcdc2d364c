"""`AsyncWorker`: the asyncio core of a worker.

One event loop runs everything: claiming jobs (BZPOPMIN on the marker, no
polling), finishing them in batches that also claim the next ones (two
calls in flight above concurrency 1: SAVES_IN_FLIGHT), renewing
all locks in one call, and the stalled-job check. A plain `def` processor
runs in a thread pool so it never starves lock renewal.

The worker holds its parts, each given only what it needs: the `Claimer`
(claims, the rate limit, the blocking wait), the `JobRunner` (a task per
job), the `Finisher` (completions, retries with backoff, failures, and
saving them), the `LockRenewer` and `StalledChecker` (background loops) and
the `Closer`. Its claim policy decides how many jobs it takes (policy.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from .. import defaults
from ..attempts import AttemptHistory
from ..connection import ConnectionLike, sent_once_client, worker_client
from ..hotpath import worker_calls
from ..job import Job
from ..metrics import MetricsOptions
from ..options import BackoffStrategy
from ..outages import Outage, recoverable
from ..queue import AsyncQueue
from ..scripts import Scripts
from ..telemetry import Telemetry, WorkerTelemetry
from .background import Background
from .claiming import Claimer, static_options
from .closing import Closer
from .finishing import Finisher
from .hooks import Listener, WorkerHooks
from .locks import LockRenewer
from .policy import ClaimGate, ClaimPolicy, Concurrency
from .processing import JobRunner
from .reporting import DEFAULT_HISTORY, WorkerReports, attempt_recorder
from .stalled import StalledChecker
from .support import Processor, blocking_connection_name, check_options, log

#: The signals that close a worker whose run() installs handlers.
SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Finish calls in flight at once. With two, the jobs one call fetched run
#: while the other is in Redis: the worker's CPU and Redis's overlap instead
#: of taking turns (Node's worker gets the same from a call per job).
SAVES_IN_FLIGHT = 2


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
        metrics: MetricsOptions | None = None,
        telemetry: Telemetry | None = None,
        attempt_history: AttemptHistory | None = DEFAULT_HISTORY,
        claim_policy: ClaimPolicy | None = None,
    ) -> None:
        check_options(processor, concurrency, limiter, metrics, claim_policy)
        self.name = name
        self.processor = processor
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
        #: Read when run() starts closing: a caller may shorten it until then.
        self.close_timeout = close_timeout
        self.metrics = metrics
        #: How many jobs it claims: `concurrency` unless a policy was given.
        self.claim_policy = claim_policy or Concurrency(concurrency)
        #: A policy's hook run before each claim (policy.ClaimGate), or None.
        self._gate = (
            self.claim_policy if isinstance(self.claim_policy, ClaimGate) else None
        )
        self.id = uuid.uuid4().hex
        pool_size = concurrency + defaults.WORKER_POOL_SPARE
        self.queue = AsyncQueue(name, worker_client(connection, pool_size), prefix)
        self.keys = self.queue.keys
        self.hooks = WorkerHooks(worker_name or name)
        self.telemetry = WorkerTelemetry(name, worker_name, telemetry)
        #: What the worker tells listeners, telemetry and the attempt history.
        self.reports = WorkerReports(
            self.hooks,
            self.telemetry,
            attempt_recorder(attempt_history, self.queue, worker_name or self.id),
        )
        # Claims and finishes go where redis-py never re-sends a command.
        self._once = Scripts(sent_once_client(self.queue.client))
        #: Their lean path (None on a cluster): a connection per finish call.
        self._calls = worker_calls(self._once, SAVES_IN_FLIGHT)
        self._outage = Outage(f"worker {name}", log)
        #: Set when the loop should look again: a job ended, capacity grew,
        #: Redis answered again, close() was called.
        self._wake = asyncio.Event()
        #: Finish calls in flight, and the jobs they may claim between them.
        self._saves: set[asyncio.Task[None]] = set()
        self._fetching = 0
        self._closer = Closer(name, self._wake, self._outage)
        self._finisher = Finisher(
            name=name,
            keys=self.keys,
            once=self._once,
            calls=self._calls,
            backoff_strategy=backoff_strategy,
            remove_on_complete=remove_on_complete,
            remove_on_fail=remove_on_fail,
            closing=lambda: self._closer.asked,
            outage=self._outage,
            reports=self.reports,
            rate_limited=lambda ttl_ms: self._claimer.hold(ttl_ms, whole=True),
        )
        self._runner = JobRunner(
            queue=self.queue,
            processor=processor,
            threads=concurrency,
            finisher=self._finisher,
            wake=self.wake,
            reports=self.reports,
        )
        self._claimer = Claimer(
            keys=self.keys,
            client=self.queue.client,
            once=self._once,
            calls=self._calls,
            connection_name=blocking_connection_name(
                self.keys.prefix, name, worker_name
            ),
            static=static_options(
                self.id, lock_duration, limiter, worker_name, metrics
            ),
            lock_duration=lock_duration,
            drain_delay=drain_delay,
            start=self._runner.start,
            outage=self._outage,
            reports=self.reports,
        )
        #: Shared by the background loops (and those a caller adds).
        self.background = Background(name, self.queue, self._outage, self.wake)
        self._locks = LockRenewer(
            name,
            self.keys,
            lock_duration,
            self._locks_held,
            self.background,
            self.reports,
        )
        self._stalled = StalledChecker(
            name,
            self.keys,
            max_stalled_count,
            stalled_interval,
            self._jobs_moved_back,
            self.background,
            self.reports,
        )
        self.claim_policy.bind(self.wake)
        if concurrency == 1:
            self._runner.chain = self._save_from_job

    # --- public -----------------------------------------------------------
    @property
    def is_async(self) -> bool:
        """Whether the processor is awaited (else it runs on a thread)."""
        return self._runner.is_async

    @property
    def closing(self) -> bool:
        """Whether close() was called (the worker no longer claims jobs)."""
        return self._closer.asked

    @property
    def running_jobs(self) -> list[Job]:
        """Jobs this worker is processing now."""
        return list(self._runner.running.values())

    @property
    def processed(self) -> int:
        """Attempts that completed."""
        return self._finisher.processed

    @property
    def failed(self) -> int:
        """Attempts that failed, retried or not."""
        return self._finisher.failed

    @property
    def abandoned(self) -> int:
        """Jobs still running when close() gave up on them (close_timeout,
        or force): the stalled check returns them to wait."""
        return self._closer.abandoned

    def on(self, event: str, listener: Listener | None = None) -> Any:
        """Call `listener` on a worker event (see queues.worker.hooks); without
        a listener, a decorator. Returns the listener."""
        return self.hooks.on(event, listener)

    def off(self, event: str, listener: Listener) -> None:
        """Stop calling `listener` on `event`."""
        self.hooks.off(event, listener)

    def claim_capacity(self) -> int:
        """How many more jobs may be claimed now: the claim policy's answer,
        re-asked whenever a job ends or wake() is called."""
        return self.claim_policy.capacity(len(self._runner.running) + self._fetching)

    def wake(self) -> None:
        """Make the loop re-check `claim_capacity()` (call after freeing capacity)."""
        self._wake.set()

    async def run(self, install_signals: bool = True) -> None:
        """Process jobs until `close()` (or SIGTERM/SIGINT when installed)."""
        loop = asyncio.get_running_loop()
        self.hooks.bind(loop)
        self.reports.started()
        signals = (
            install_signals and threading.current_thread() is threading.main_thread()
        )
        if signals:
            for sig in SIGNALS:
                loop.add_signal_handler(sig, self.close)
        self._runner.open(loop)
        self.background.start(self._locks.run(), self._stalled.run())
        try:
            await self._claimer.connect()
            await self._main_loop()
            await self._closer.drain(
                self.close_timeout,
                self._runner.tasks,
                self._finisher,
                self._claimer.opts(),
            )
        finally:
            await self.background.stop()
            if signals:
                for sig in SIGNALS:
                    loop.remove_signal_handler(sig)
            await self._close_clients()
            await self.reports.stopped(defaults.HOOKS_STOP_S)

    def close(self, force: bool = False) -> None:
        """Stop claiming; running jobs finish (up to close_timeout); run()
        returns. With `force`, run() returns at once: running jobs are left
        to the stalled check, as BullMQ's `worker.close(true)`."""
        if self._closer.ask(force):
            self.hooks.emit("closing")

    # --- the loop -------------------------------------------------------------
    async def _main_loop(self) -> None:
        """Until close(): save what finished (claiming more in the same call),
        else wait for capacity, else wait out a rate limit, else claim, else
        (the queue drained) wait for a job."""
        try:
            while not self._closer.asked:
                self._wake.clear()
                try:
                    self._reap_saves()
                    if self._finisher.pending and self.concurrency == 1:
                        await self._save_finished(*self._next_save())
                    elif self._finisher.pending and len(self._saves) < SAVES_IN_FLIGHT:
                        self._start_save()
                    elif self.claim_capacity() <= 0 or (
                        self._saves and self._claimer.drained
                    ):
                        await self._wake.wait()
                    elif (limited_s := self._claimer.limited_for()) > 0:
                        await self._sleep_or_wake(limited_s)
                    elif not self._claimer.drained:
                        await self._claim()
                    else:
                        await self._claimer.wait_for_job(self._wake)
                except Exception as exc:
                    if not recoverable(exc):
                        raise
                    self.reports.error(exc)
                    delay = self._outage.failed(exc)
                    self._claimer.interrupted()
                    await self._sleep_or_wake(delay)
        finally:
            if self._saves:  # what fails is pending again: the drain saves it
                await asyncio.wait(self._saves)
                for task in self._saves:
                    if not task.cancelled():
                        task.exception()  # seen: no "never retrieved" warning
                self._saves.clear()
            await self._claimer.stop_waiting()

    async def _sleep_or_wake(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._wake.wait(), max(seconds, 0))
        except TimeoutError:
            pass

    def _batch(self) -> int:
        """How many jobs to claim in one call (one where a gate picks each)."""
        most = 1 if self._gate is not None else defaults.FETCH_BATCH_MAX
        return min(self.claim_capacity(), most)

    async def _claim(self) -> None:
        """Claim, unless the policy's gate holds (then wait out its hold)."""
        if self._gate is not None:
            hold = await self._gate.before_claim()
            if hold > 0:
                await self._sleep_or_wake(hold)
                return
        batch = self._batch()
        if batch <= 0:
            # The room went while the gate looked (another queue of a shared
            # GPU process claimed): a claim of none would answer "nothing
            # waits" and leave the worker drained, blocked on a marker already
            # taken while its jobs wait. Wait for room instead.
            return
        await self._claimer.claim(batch)

    def _next_save(self) -> tuple[str, list[dict[str, Any]], int, float | None]:
        """The next finish call: its opts, the attempts it saves, how many
        jobs it claims -- none when closing, rate limited, or the policy's
        gate picks each claim; with room for more than one job, at most
        half of it, so that the other half rides in the next call while
        this one is in Redis -- and whether its claim renews the lease
        (Claimer.renewing)."""
        fetch = 0
        if (
            self._gate is None
            and not self._closer.asked
            and self._claimer.limited_for() <= 0
        ):
            fetch = max(self._batch(), 0)
            if self.concurrency > 1:
                fetch = min(fetch, (self.concurrency + 1) // 2)
        self._fetching += fetch
        opts = self._claimer.opts(fetch)
        return opts, self._finisher.begin(), fetch, self._claimer.renewing()

    def _start_save(self) -> None:
        """Save what finished in a call of its own, SAVES_IN_FLIGHT at most
        at once (a worker of concurrency 1 awaits its one call instead: it
        has nothing to run meanwhile)."""
        task = asyncio.create_task(self._save_finished(*self._next_save()))
        self._saves.add(task)
        task.add_done_callback(lambda _: self.wake())

    async def _save_from_job(self) -> None:
        """At concurrency 1, the ended job's task saves it (JobRunner.chain),
        claiming the next job as the loop would; the loop sleeps meanwhile
        (no room: the job ran, or the call's claim is counted as fetching).
        Left to the loop when there is nothing to save (the loop took it),
        the worker closes (the drain saves it) or the call failed (the
        entries are pending again: the loop's retry waits out an outage and
        reports what does not clear)."""
        if not self._finisher.pending or self._closer.asked:
            return
        with contextlib.suppress(Exception):  # (the loop saves again, reports)
            await self._save_finished(*self._next_save())

    async def _save_finished(
        self,
        opts: str,
        entries: list[dict[str, Any]],
        fetch: int,
        renewing: float | None,
    ) -> None:
        try:
            claimed = await self._finisher.save(opts, entries)
        finally:
            self._fetching -= fetch
        if fetch:
            self._claimer.take(*claimed, renewing=renewing)

    def _reap_saves(self) -> None:
        """Forget the finish calls that ended; raise the first one's error
        (its entries are pending again) for the loop to handle."""
        done = [task for task in self._saves if task.done()]
        self._saves.difference_update(done)
        errors = [t.exception() for t in done if not t.cancelled()]
        for error in errors:
            if error is not None:
                raise error

    def _locks_held(self) -> dict[str, str | None]:
        """Every lock this worker holds: running jobs, and finished ones not
        saved yet."""
        return {**self._runner.locks(), **self._finisher.locks()}

    def _jobs_moved_back(self) -> None:
        """The stalled check put jobs back in wait: claim them now."""
        self._claimer.expect_jobs()
        self.wake()

    async def _close_clients(self) -> None:
        await self.reports.written(defaults.HELPER_STOP_S)
        await self._claimer.close()
        await self._once.client.aclose()
        self._runner.close()
        await self.queue.close()
