"""The events reader: one per server process (per event loop), started lazily.

It follows the `events` stream of every queue that a socket of this process
subscribed to, and Bullpen's workers stream while a socket follows the GPUs,
with one XREAD BLOCK over all of them on one connection (on a Redis Cluster,
one per slot group, all at once: queues/streamreads.py). What it reads it
hands to this process's hub (`route`, in memory), which gives it to the
sockets that follow it:

- `{"type": "queue.events", "queue", "events": [...]}`: one message per queue
  per read, progress coalesced here to 10 a second per job (the one place
  progress is coalesced), and `{"type": "queue.counts", "message": {...}}`
  when a queue's counts change (read once a second per followed queue, for
  all its queues in one pipelined round trip, however many sockets follow);
- `{"type": "workers.update", "message": {...}}`: what changed in the
  process's fleet snapshot since the last one sent (snapshots.py: changed
  GPU cells, Running counts, hosts, the summary; never the whole fleet), at
  most once a second after heartbeats (and every 5 s regardless, so dead
  hosts vanish).

Each process reads what its own sockets follow, once: sockets never cause
Redis reads per event, only subscribing does (replay.py, on `side`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from dashboard.shared.conf import DEFAULTS
from gpu_workers import Fleet
from gpu_workers.fleet_snapshot import FleetSnapshot
from gpu_workers.keys import BullpenKeys
from queues.connection import async_waiting_client
from queues.events import id_order
from queues.keys import QueueKeys
from queues.streamreads import BlockingReads

from . import defaults, messages, snapshots
from .coalesce import Coalescer, batch_message
from .hub import get_hub
from .subscriptions import FollowRefused, keys_of

log = logging.getLogger(__name__)

#: Where the reader hands what it read (the hub's `route`).
Route = Callable[[dict[str, Any]], None]


@dataclass
class Followed:
    """One followed queue: where the reader is in its stream and its counts."""

    key: str
    keys: QueueKeys
    last_id: str
    refs: int = 0
    counts: dict[str, int] | None = None
    paused: bool | None = None


@dataclass
class ReaderStats:
    """What the reader did (read by tests and bench/dashboard.py)."""

    xreads: int = 0
    entries: int = 0
    #: Messages handed to the hub's groups (each reaches all of its sockets).
    group_sends: int = 0
    counts_reads: int = 0
    fleet_reads: int = 0
    errors: int = 0
    started: int = 0


class EventsReader:
    """Follows streams for this process's sockets and hands what it reads to
    the hub."""

    def __init__(
        self,
        redis_url: str,
        prefixes: list[str],
        route: Route,
        namespace: str = "bullpen",
        max_queues: int = DEFAULTS.live_max_queues_per_process,
        fleet_snapshot: Callable[[], FleetSnapshot] | None = None,
    ) -> None:
        self.redis_url = redis_url
        #: Where the fleet is read: the process's snapshot cache, which the
        #: GPU page reads too, so that the grid's version is the messages'
        #: (default: this reader's own Fleet, read each time).
        self._fleet_snapshot = fleet_snapshot
        #: Most queues followed at once, for all of this process's sockets.
        self.max_queues = max_queues
        self.prefixes = list(prefixes)
        self.route = route
        self.bkeys = BullpenKeys(namespace)
        self.namespace = namespace
        self.followed: dict[str, Followed] = {}
        self.worker_refs = 0
        self.workers_last_id = "$"
        #: What a socket that starts following the GPUs is sent first (the
        #: version and summary), and the state the next diff starts from.
        self.workers_snapshot: dict[str, Any] | None = None
        self.workers_state: snapshots.WorkersState | None = None
        self.coalescer = Coalescer(defaults.PROGRESS_INTERVAL_S)
        self.stats = ReaderStats()
        # Counts, replays, unblocking: a small pool that waits when busy.
        self.side: Any = async_waiting_client(
            redis_url, max_connections=8, decode_responses=True
        )
        # The blocking reads' own connections (one per slot on a cluster).
        self._reads = BlockingReads(
            redis_url, self.side, defaults.XREAD_BLOCK_MS / 1000
        )
        self._fleet: Fleet | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._counts_at = 0.0
        self._workers_dirty = False
        self._workers_min_at = 0.0
        self._workers_max_at = 0.0

    # --- what sockets call ------------------------------------------------------------
    async def follow(self, queue_key: str) -> None:
        """Start (or keep) following a queue's events for one more socket."""
        followed = self.followed.get(queue_key)
        if followed is None:
            self._check_room(queue_key)
            keys = keys_of(queue_key, self.prefixes)
            # Start at the stream's end: what came before is a replay's job.
            newest = await self.side.xrevrange(keys.events, count=1)
            start = newest[0][0] if newest else "0-0"
            followed = self.followed.get(queue_key)
            if followed is None:
                self._check_room(queue_key)  # another socket may have taken it
                followed = Followed(queue_key, keys, start)
                self.followed[queue_key] = followed
                self._counts_at = 0.0
                await self._interrupt()
        followed.refs += 1
        self._ensure_running()

    def _check_room(self, queue_key: str) -> None:
        if len(self.followed) >= self.max_queues:
            raise FollowRefused(
                f"not following {queue_key}: this dashboard process already "
                f"follows {len(self.followed)} queues, its most "
                "(BULLPEN_LIVE_MAX_QUEUES_PER_PROCESS)"
            )

    async def release(self, queue_key: str) -> None:
        """One socket less follows the queue; stop reading it after the last."""
        followed = self.followed.get(queue_key)
        if followed is None:
            return
        followed.refs -= 1
        if followed.refs <= 0:
            del self.followed[queue_key]

    async def follow_workers(self) -> None:
        """Start (or keep) following the workers stream for one more socket."""
        self.worker_refs += 1
        if self.worker_refs == 1:
            self.workers_last_id = "$"
            self._workers_max_at = 0.0
            await self._interrupt()
        self._ensure_running()

    async def release_workers(self) -> None:
        """One socket less follows the GPUs."""
        self.worker_refs = max(self.worker_refs - 1, 0)

    def counts_message(self, queue_key: str) -> dict[str, Any] | None:
        """The last counts read for a queue, as the browser message."""
        f = self.followed.get(queue_key)
        if f is None or f.counts is None:
            return None
        return snapshots.counts_message(f.key, f.counts, f.paused, f.last_id)

    async def stop(self) -> None:
        """Stop reading and close the connections (tests, shutdown)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        await self._close_blocking()
        if self._fleet is not None:
            await asyncio.to_thread(self._fleet.close)
            self._fleet = None
        await self.side.aclose()

    # --- the loop ---------------------------------------------------------------------
    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self.stats.started += 1
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="bullpen-events-reader"
            )
        self._wake.set()

    async def _interrupt(self) -> None:
        """Make a blocked XREAD return so that it picks up new streams."""
        self._wake.set()
        await self._reads.wake()

    async def _run(self) -> None:
        backoff = defaults.RETRY_INITIAL_S
        try:
            while True:
                if not self.followed and not self.worker_refs:
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), defaults.LINGER_S)
                    except TimeoutError:
                        if not self.followed and not self.worker_refs:
                            return
                    continue
                try:
                    started = time.monotonic()
                    if await self._step():
                        rest = started + defaults.BATCH_INTERVAL_S - time.monotonic()
                        if rest > 0:
                            await asyncio.sleep(rest)
                    backoff = defaults.RETRY_INITIAL_S
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - keep following after blips
                    self.stats.errors += 1
                    log.warning("events reader: %r (retrying in %.1fs)", exc, backoff)
                    await self._close_blocking()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, defaults.RETRY_MAX_S)
        finally:
            if self._task is asyncio.current_task():
                self._task = None
            await self._close_blocking()

    async def _close_blocking(self) -> None:
        await self._reads.close()

    def _block_ms(self, now: float) -> int:
        waits = [defaults.XREAD_BLOCK_MS / 1000, self._counts_at - now]
        held = self.coalescer.next_due_s()
        if held is not None:
            waits.append(held)
        if self.worker_refs:
            waits.append(self._workers_max_at - now)
            if self._workers_dirty:
                waits.append(self._workers_min_at - now)
        return max(int(min(waits) * 1000), 1)

    async def _step(self) -> bool:
        """One read and what follows from it; whether it found entries."""
        streams = {f.keys.events: f.last_id for f in self.followed.values()}
        by_stream = {f.keys.events: f for f in self.followed.values()}
        if self.worker_refs:
            if self.workers_last_id == "$":
                newest = await self.side.xrevrange(self.bkeys.stream, count=1)
                self.workers_last_id = newest[0][0] if newest else "0-0"
            streams[self.bkeys.stream] = self.workers_last_id
        reply = await self._read(streams, by_stream, self._block_ms(time.monotonic()))
        if reply is None:
            return False
        batches: dict[str, list[dict[str, Any]]] = {}
        for held in self.coalescer.due():
            batches.setdefault(held["queue"], []).append(held)
        for stream, entries in reply or []:
            if not entries:
                continue
            if stream == self.bkeys.stream:
                self.workers_last_id = entries[-1][0]
                self._workers_dirty = True
                continue
            followed = by_stream.get(stream)
            if followed is None:
                continue
            out = batches.setdefault(followed.key, [])
            for stream_id, raw in entries:
                message = messages.from_entry(followed.key, stream_id, raw)
                batch_message(self.coalescer, message, out)
            self.stats.entries += len(entries)
            if id_order(entries[-1][0]) > id_order(followed.last_id):
                followed.last_id = entries[-1][0]
        for queue_key, batch in batches.items():
            if batch:
                self._send(
                    {"type": "queue.events", "queue": queue_key, "events": batch}
                )
        now = time.monotonic()
        if now >= self._counts_at:
            self._counts_at = now + defaults.COUNTS_INTERVAL_S
            await self._send_counts()
        if self.worker_refs and (
            now >= self._workers_max_at
            or (self._workers_dirty and now >= self._workers_min_at)
        ):
            await self._send_workers()
        return bool(reply)

    async def _read(
        self, streams: dict[str, str], by_stream: dict[str, Followed], block_ms: int
    ) -> list[Any] | None:
        """The entries of one blocking read per slot group (None: a followed
        key was not a stream, and is followed no more)."""

        async def xread(client: Any, ids: dict[str, str]) -> Any:
            return await client.xread(ids, count=defaults.XREAD_COUNT, block=block_ms)

        reply: list[Any] = []
        for group in await self._reads.read(streams, xread):
            error = group.error
            if error is None:
                self.stats.xreads += 1
                reply.extend(group.reply)
            elif isinstance(error, ResponseError) and "WRONGTYPE" in str(error):
                await self._drop_broken(by_stream)
                return None
            else:
                raise error
        return reply

    def _send(self, message: dict[str, Any]) -> None:
        self.stats.group_sends += 1
        self.route(message)

    # --- counts and workers -----------------------------------------------------------
    async def _send_counts(self) -> None:
        items = list(self.followed.values())
        if not items:
            return
        self.stats.counts_reads += len(items)
        results = await snapshots.read_counts(self.side, [f.keys for f in items])
        for followed, result in zip(items, results):
            if isinstance(result, BaseException):
                log.warning("counts of %s: %r", followed.key, result)
                continue
            counts, paused = result
            if counts == followed.counts and paused == followed.paused:
                continue
            followed.counts, followed.paused = counts, paused
            message = snapshots.counts_message(
                followed.key, counts, paused, followed.last_id
            )
            self._send({"type": "queue.counts", "message": message})

    async def _send_workers(self) -> None:
        now = time.monotonic()
        changed = self._workers_dirty
        self._workers_dirty = False
        self._workers_min_at = now + defaults.WORKERS_MIN_INTERVAL_S
        self._workers_max_at = now + defaults.WORKERS_MAX_INTERVAL_S
        self.stats.fleet_reads += 1
        read = self._fleet_snapshot
        if read is None:
            if self._fleet is None:
                self._fleet = Fleet(self.redis_url, self.namespace)
            read = self._fleet.snapshot
        old = self.workers_state

        def diff() -> tuple[snapshots.WorkersState, dict[str, Any] | None]:
            new = snapshots.workers_state(read())
            if old is not None and new.version <= old.version:
                return old, None
            return new, snapshots.workers_message(new, old)

        new, message = await asyncio.to_thread(diff)
        if message is None:
            # No newer snapshot: the next diff still starts from what was sent.
            # A heartbeat was announced meanwhile, though: the process's
            # snapshot (bounded age) may predate it, so look again after the
            # minimum interval rather than at the maximum one.
            self._workers_dirty = changed
            return
        self.workers_state = new
        self.workers_snapshot = snapshots.workers_message(new, None)
        self._send({"type": "workers.update", "message": message})

    async def _drop_broken(self, by_stream: dict[str, Followed]) -> None:
        """Stop following keys that are not streams (one would fail every read)."""
        for stream, followed in by_stream.items():
            kind = await self.side.type(stream)
            if kind not in ("stream", "none"):
                log.warning("%s is a %s, not a stream: not followed", stream, kind)
                self.followed.pop(followed.key, None)


_readers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EventsReader] = (
    weakref.WeakKeyDictionary()
)


def get_reader() -> EventsReader:
    """This process's (this event loop's) reader, made on first use, handing
    what it reads to this loop's hub."""
    from django.conf import settings

    from dashboard.shared import conf
    from dashboard.shared.reads import fleet_snapshot

    loop = asyncio.get_running_loop()
    reader = _readers.get(loop)
    if reader is None:
        reader = EventsReader(
            settings.REDIS_URL,
            list(conf.get().prefixes),
            get_hub().route,
            conf.get().namespace,
            max_queues=conf.get().live_max_queues_per_process,
            fleet_snapshot=fleet_snapshot,
        )
        _readers[loop] = reader
    return reader


async def reset_reader() -> None:
    """Stop and forget this loop's reader (tests change REDIS_URL between runs)."""
    reader = _readers.pop(asyncio.get_running_loop(), None)
    if reader is not None:
        await reader.stop()
