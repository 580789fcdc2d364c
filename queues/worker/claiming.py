"""Claiming jobs: the claim script, what its answer means (jobs, a rate
limit reached, an empty queue and when its next delayed job is due), and
the blocking wait on the queue's marker (BZPOPMIN, no polling) once the
queue is drained."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from redis.exceptions import AskError, MovedError
from redis.exceptions import ConnectionError as RedisConnectionError

from .. import codec, defaults, ops
from ..cluster import is_cluster_client
from ..drive import run_async
from ..outages import recoverable
from .support import blocking_client, log

if TYPE_CHECKING:
    from ..hotpath import AsyncCalls
    from ..keys import QueueKeys
    from ..metrics import MetricsOptions
    from ..outages import Outage
    from ..scripts import Scripts
    from .reporting import WorkerReports

#: Starts a claimed job: its id, its hash's fields and its lock token.
Start = Callable[[str, dict[str, str], str], None]


def static_options(
    token: str,
    lock_duration: int,
    limiter: Mapping[str, int] | None,
    worker_name: str | None,
    metrics: MetricsOptions | None,
) -> str:
    """The part of the worker opts that claims and finishes always send,
    encoded once: its JSON object without the opening brace."""
    static: dict[str, Any] = {"token": token, "lockDuration": lock_duration}
    if limiter:
        static["limiter"] = dict(limiter)
    if worker_name:
        static["name"] = worker_name
    if metrics is not None:
        static["maxMetricsSize"] = metrics.max_data_points
    return codec.dumps(static)[1:]


class Claimer:
    """Claims the jobs of one worker and waits for new ones (its loop only)."""

    def __init__(
        self,
        *,
        keys: QueueKeys,
        client: Any,
        once: Scripts,
        calls: AsyncCalls | None,
        connection_name: str,
        static: str,
        lock_duration: int,
        drain_delay: float,
        start: Start,
        outage: Outage,
        reports: WorkerReports,
    ) -> None:
        self._keys = keys
        self._claim_keys = keys.move_to_active_keys()
        #: The queue's client: the blocking client is its sibling.
        self._client = client
        self._once = once
        self._calls = calls
        self._connection_name = connection_name
        self._static = static
        self._drain_delay = drain_delay
        self._start = start
        self._outage = outage
        self._reports = reports
        #: Jobs claimed so far (the opts' seq).
        self._seq = 0
        #: Until when (monotonic s) claims may leave this worker's lease in
        #: `groups:leases` as it is: a quarter of a lock duration after a
        #: call that renewed it was made.
        self._lease_fresh_for = lock_duration / 4 / 1000
        self._lease_fresh_until = 0.0
        #: When the last opts made were made, if their claims renew the lease.
        self._renewing: float | None = None
        #: The last claim found the queue empty: wait on the marker.
        self.drained = False
        #: When the rate limit window ends (ms), or 0.
        self._limited_until = 0.0
        #: When the next delayed job is due (ms), or 0.
        self._block_until = 0.0
        self._blocking: Any = None
        self._block_task: asyncio.Task[Any] | None = None
        #: In wait_for_job, looking at the block task (it takes what it pops).
        self._looking = False
        #: Markers popped while not looking, being given back.
        self._given_back: set[asyncio.Task[Any]] = set()

    def opts(self, fetch: int = 0, claims: int = 0) -> str:
        """The worker opts of a claim of `claims` jobs, or of a finish
        claiming `fetch`; their seq numbers (in their lock tokens) are
        reserved, so calls in flight together never share one. With
        `leased` while this worker's lease was renewed lately: a claim of
        grouped jobs then leaves it as it is (a TIME and a ZADD fewer)."""
        seq = self._seq
        self._seq += fetch + claims
        now = time.monotonic()
        if now < self._lease_fresh_until:
            self._renewing = None
            return f'{{"seq":{seq},"fetch":{fetch},"leased":1,{self._static}'
        self._renewing = now
        return f'{{"seq":{seq},"fetch":{fetch},{self._static}'

    def renewing(self) -> float | None:
        """When the opts just made were made, if a claim they carry renews
        this worker's lease (the call's `take` gets it); None otherwise."""
        return self._renewing

    def limited_for(self) -> float:
        """Seconds until the rate limit window ends (0 or less: not limited)."""
        return self._limited_until / 1000 - time.time()

    async def connect(self) -> None:
        """Open the named blocking connection now (Node's getWorkers() lists
        it, and a busy worker may not block for a long time) and the claims'
        (the first claim is not late); Redis unreachable is waited out later."""
        try:
            await (await self._open_blocking()).ping()
            await self._once.client.ping()
        except Exception as exc:
            if not recoverable(exc):
                raise

    async def claim(self, count: int) -> None:
        """Claim up to `count` jobs and start them."""
        opts = self.opts(claims=count)
        renewing = self._renewing
        claim = ops.claim(
            self._claim_keys, self._keys.base, int(time.time() * 1000), opts, count
        )
        flat, ttl, next_delay = await run_async(
            claim,
            self._once.client,
            self._once,
            refusals_as_unavailable=False,
            calls=self._calls,
        )
        # Only a claim or a finish ends an outage: reads (and a script with
        # nothing to write) may succeed while Redis still refuses writes.
        self._outage.succeeded()
        self.take(flat, ttl, next_delay, renewing=renewing)

    def take(
        self,
        flat: list[Any],
        ttl: Any,
        next_delay: Any,
        renewing: float | None = None,
    ) -> None:
        """Start the jobs of a claim's answer (or a finish's); note a rate
        limit reached, or an empty queue and its next due time. `renewing`:
        the call's opts renewed the lease (`renewing()`), which a grouped
        job claimed says it did."""
        grouped = False
        for i in range(0, len(flat), 3):
            fields = codec.pairs_to_dict(flat[i + 2])
            grouped = grouped or bool(fields.get("gid"))
            self._start(flat[i], fields, flat[i + 1])
        if grouped and renewing is not None:
            self._lease_fresh_until = max(
                self._lease_fresh_until, renewing + self._lease_fresh_for
            )
        ttl = int(ttl or 0)
        if ttl > 0:
            self.hold(ttl)
        elif not flat:
            self.drained = True
            self._reports.nothing_to_claim()
            next_delay = float(next_delay or 0)
            if next_delay > 0:
                self._block_until = next_delay

    def hold(self, ttl_ms: int, whole: bool = False) -> None:
        """The rate limit holds for `ttl_ms` more ms: claim nothing until
        then. A claim's answer is held RATE_LIMIT_MAX_DELAY_MS at most (the
        next claim reads the limiter again, and sees it lifted); a
        processor's RateLimitError `whole` (BullMQ's limitUntil), as a worker
        without a limiter does not read the limiter when it claims."""
        self._reports.rate_limited(ttl_ms)
        if not whole:
            ttl_ms = min(ttl_ms, defaults.RATE_LIMIT_MAX_DELAY_MS)
        self._limited_until = time.time() * 1000 + ttl_ms
        # Rate limited, not drained: claim directly once the window ends, as
        # no marker is written when it does.
        self.drained = False

    def expect_jobs(self) -> None:
        """Jobs were put back in wait (the stalled check): claim directly."""
        self.drained = False

    async def wait_for_job(self, wake: asyncio.Event) -> None:
        """Block on the marker until a job may be there, the next delayed job
        is due, or `wake` is set (a running job ended, close()...). A wait
        cut short by `wake` goes on in the next call."""
        now = time.time() * 1000
        if self._block_until and self._block_until <= now:
            self._block_until = 0
            self.drained = False
            return
        if self._block_task is None:
            self._block_task = asyncio.ensure_future(self._block())
            self._block_task.add_done_callback(self._popped_meanwhile)
        block_task = self._block_task
        woken = asyncio.create_task(wake.wait())
        timeout = (self._block_until - now) / 1000 if self._block_until else None
        self._looking = True
        try:
            done, _ = await asyncio.wait(
                {block_task, woken},
                timeout=timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            self._looking = False
        woken.cancel()
        if block_task in done:
            self._block_task = None
            popped = block_task.result()
            score = float(popped[2]) if popped else 0.0
            if score > time.time() * 1000 + 1:
                if not self._block_until or score < self._block_until:
                    self._block_until = score
            else:
                self.drained = False
        elif not done:
            self._block_until = 0
            self.drained = False

    def _popped_meanwhile(self, task: asyncio.Task[Any]) -> None:
        """A wait cut short by `wake` leaves its BZPOPMIN pending while the
        worker runs, claims or has no room. A marker it pops then wakes no
        one: the other workers of the queue stay blocked on the marker it
        took (up to their drain delay, a minute for GPU workers) while a job
        waits. So give the marker back, as it was, and forget the pop; this
        worker blocks anew when it next waits."""
        if self._looking or task is not self._block_task or task.cancelled():
            return
        if task.exception() is not None:
            return  # seen (and raised) when the worker next waits
        popped = task.result()
        if not popped:
            return  # timed out: the next wait blocks again, as after a look
        self._block_task = None
        member, score = popped[1], float(popped[2])
        back = asyncio.ensure_future(self._give_back(member, score))
        self._given_back.add(back)
        back.add_done_callback(self._given_back.discard)

    async def _give_back(self, member: Any, score: float) -> None:
        try:
            await self._client.zadd(self._keys.marker, {member: score})
        except Exception as exc:  # noqa: BLE001 - its next wait claims anyway
            log.warning("could not put a popped marker back: %r", exc)
            self.drained = False

    def interrupted(self) -> None:
        """A claim, finish or wait failed: drop the wait, claim directly next."""
        if self._block_task is not None:
            self._block_task.cancel()
            self._block_task = None
        self.drained = False

    async def stop_waiting(self) -> None:
        """End a wait still pending (the worker's loop is ending)."""
        if self._block_task is not None:
            self._block_task.cancel()
            await asyncio.wait([self._block_task], timeout=defaults.HELPER_STOP_S)

    async def close(self) -> None:
        """Close the blocking client."""
        if self._blocking is not None:
            await self._blocking.aclose()

    async def _block(self) -> Any:
        """BZPOPMIN on the marker. On a cluster, a moved slot (MOVED, primary
        gone) drops the blocking client, made again next time; nothing popped."""
        client = self._blocking or await self._open_blocking()
        try:
            return await client.bzpopmin(self._keys.marker, self._drain_delay)
        except (MovedError, AskError, RedisConnectionError):
            if not is_cluster_client(self._client):
                raise
            self._blocking = None
            await client.aclose()
            return None

    async def _open_blocking(self) -> Any:
        self._blocking = await blocking_client(
            self._client, self._keys.marker, self._connection_name
        )
        return self._blocking
