"""The events reader: one per server process (per event loop), started lazily.

It follows the `events` stream of every queue that a socket of this process
subscribed to, and Bullpen's workers stream while a socket follows the GPUs,
with one XREAD BLOCK over all of them on one connection. What it reads goes to
channel-layer groups, never to sockets directly:

- `q.<sha1>` gets `{"type": "queue.events", "queue", "events": [...]}`: one
  message per queue per read, progress coalesced to 10 a second per job, and
  `{"type": "queue.counts", "message": {...}}` when a queue's counts change
  (read once a second per followed queue, however many sockets follow it);
- `workers` gets `{"type": "workers.update", "message": {...}}` at most once a
  second after heartbeats (and every 5 s regardless, so dead hosts vanish).

Sockets never cause Redis reads per event: only subscribing does (joining the
groups, and replaying what a reconnecting browser missed).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass
from typing import Any, cast

import redis.asyncio as aioredis
from channels.layers import BaseChannelLayer, get_channel_layer
from redis.exceptions import ResponseError

from dashboard.reads import fleet as fleet_reads
from gpu_workers import Fleet
from gpu_workers.keys import BullpenKeys
from queues import AsyncQueue
from queues.keys import QueueKeys

from . import defaults, messages
from .coalesce import Coalescer
from .messages import WORKERS_GROUP, id_key, queue_group
from .subscriptions import FollowRefused, split_queue_key

log = logging.getLogger(__name__)


@dataclass
class Followed:
    """One followed queue: where the reader is in its stream and its counts."""

    key: str
    queue: AsyncQueue
    events: str
    last_id: str
    refs: int = 0
    counts: dict[str, int] | None = None
    paused: bool | None = None


@dataclass
class ReaderStats:
    """What the reader did (read by tests and bench/dashboard.py)."""

    xreads: int = 0
    entries: int = 0
    group_sends: int = 0
    counts_reads: int = 0
    fleet_reads: int = 0
    errors: int = 0
    started: int = 0


class EventsReader:
    """Follows streams for this process's sockets and fans out through groups."""

    def __init__(
        self,
        redis_url: str,
        prefixes: list[str],
        namespace: str = "bullpen",
        layer: BaseChannelLayer | None = None,
        max_queues: int = defaults.MAX_QUEUES_PER_PROCESS,
    ) -> None:
        self.redis_url = redis_url
        #: Most queues followed at once, for all of this process's sockets.
        self.max_queues = max_queues
        self.prefixes = list(prefixes)
        self.bkeys = BullpenKeys(namespace)
        self.namespace = namespace
        # Settings always configure the default layer.
        self.layer = (
            layer if layer is not None else cast(BaseChannelLayer, get_channel_layer())
        )
        self.followed: dict[str, Followed] = {}
        self.worker_refs = 0
        self.workers_last_id = "$"
        self.workers_snapshot: dict[str, Any] | None = None
        self.coalescer = Coalescer(defaults.PROGRESS_INTERVAL_S)
        self.stats = ReaderStats()
        # Counts, replays, unblocking: a small pool that waits when busy.
        self.side: Any = aioredis.Redis(
            connection_pool=aioredis.BlockingConnectionPool.from_url(
                redis_url, max_connections=8, decode_responses=True
            )
        )
        self._blocking: Any = None
        self._blocking_id: int | None = None
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
            prefix, name = split_queue_key(queue_key, self.prefixes)
            queue = AsyncQueue(name, self.side, prefix)
            # Start at the stream's end: what came before is a replay's job.
            newest = await self.side.xrevrange(queue.keys.events, count=1)
            start = newest[0][0] if newest else "0-0"
            followed = self.followed.get(queue_key)
            if followed is None:
                self._check_room(queue_key)  # another socket may have taken it
                followed = Followed(queue_key, queue, queue.keys.events, start)
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

    async def existing(self, queue_keys: set[str]) -> set[str]:
        """Those of these queues that exist: they have a `meta` or `id` key
        (what discovery looks for), read in one round trip."""
        keys = sorted(queue_keys)
        if not keys:
            return set()
        async with self.side.pipeline(transaction=False) as pipe:
            for key in keys:
                prefix, name = split_queue_key(key, self.prefixes)
                qkeys = QueueKeys(name, prefix)
                pipe.exists(qkeys.meta, qkeys.id)
            found = await pipe.execute()
        return {key for key, n in zip(keys, found) if n}

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
        followed = self.followed.get(queue_key)
        if followed is None or followed.counts is None:
            return None
        return self._counts_message(followed)

    async def replay(
        self, queue_key: str, after_id: str, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """Messages after a stream id (the newest `limit`), and whether some
        were left out (over the limit, or trimmed from the stream)."""
        if limit is None:
            limit = defaults.REPLAY_MAX_EVENTS
        prefix, name = split_queue_key(queue_key, self.prefixes)
        events = AsyncQueue(name, self.side, prefix).keys.events
        entries = await self.side.xrange(
            events, min="(" + after_id, max="+", count=limit + 1
        )
        truncated = len(entries) > limit
        if truncated:
            entries = await self.side.xrevrange(
                events, max="+", min="(" + after_id, count=limit
            )
            entries.reverse()
        elif entries:
            truncated = await self._trimmed_since(events, after_id)
        found = [messages.from_entry(queue_key, i, raw) for i, raw in entries]
        return messages.collapse_progress(found), truncated

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
        if self._blocking_id is not None:
            try:
                await self.side.execute_command("CLIENT", "UNBLOCK", self._blocking_id)
            except Exception as exc:  # noqa: BLE001 - the next read picks it up anyway
                log.debug("CLIENT UNBLOCK failed: %r", exc)

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
        client, self._blocking, self._blocking_id = self._blocking, None, None
        if client is not None:
            try:
                await client.aclose()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass

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
        if self._blocking is None:
            self._blocking = aioredis.Redis.from_url(
                self.redis_url, decode_responses=True, single_connection_client=True
            )
            self._blocking_id = await self._blocking.client_id()
        streams = {f.events: f.last_id for f in self.followed.values()}
        by_stream = {f.events: f for f in self.followed.values()}
        if self.worker_refs:
            if self.workers_last_id == "$":
                newest = await self.side.xrevrange(self.bkeys.stream, count=1)
                self.workers_last_id = newest[0][0] if newest else "0-0"
            streams[self.bkeys.stream] = self.workers_last_id
        try:
            reply = await self._blocking.xread(
                streams,
                count=defaults.XREAD_COUNT,
                block=self._block_ms(time.monotonic()),
            )
        except ResponseError as exc:
            if "WRONGTYPE" in str(exc):
                await self._drop_broken(by_stream)
                return False
            raise
        self.stats.xreads += 1
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
                self._route(messages.from_entry(followed.key, stream_id, raw), out)
            self.stats.entries += len(entries)
            if id_key(entries[-1][0]) > id_key(followed.last_id):
                followed.last_id = entries[-1][0]
        for queue_key, batch in batches.items():
            if batch:
                await self._send(
                    queue_group(queue_key),
                    {"type": "queue.events", "queue": queue_key, "events": batch},
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

    def _route(self, message: dict[str, Any], out: list[dict[str, Any]]) -> None:
        job = message.get("job")
        key = (message["queue"], job)
        if message["type"] == "progress":
            if job is None:
                out.append(message)
                return
            now = self.coalescer.offer(key, message)
            if now is not None:
                out.append(now)
            return
        if job is not None:
            held = self.coalescer.take(key)
            if held is not None:
                out.append(held)
            if message["event"] in messages.FINAL_EVENTS:
                self.coalescer.forget(key)
        out.append(message)

    async def _send(self, group: str, message: dict[str, Any]) -> None:
        self.stats.group_sends += 1
        await self.layer.group_send(group, message)

    # --- counts and workers -----------------------------------------------------------
    def _counts_message(self, followed: Followed) -> dict[str, Any]:
        return {
            "type": "counts",
            "queue": followed.key,
            "counts": followed.counts,
            "paused": followed.paused,
            "id": followed.last_id,
        }

    async def _read_counts(self, followed: Followed) -> tuple[dict[str, int], bool]:
        counts, paused = await asyncio.gather(
            followed.queue.get_counts(), followed.queue.is_paused()
        )
        return counts, bool(paused)

    async def _send_counts(self) -> None:
        items = list(self.followed.values())
        if not items:
            return
        self.stats.counts_reads += len(items)
        results = await asyncio.gather(
            *(self._read_counts(f) for f in items), return_exceptions=True
        )
        for followed, result in zip(items, results):
            if isinstance(result, BaseException):
                log.warning("counts of %s: %r", followed.key, result)
                continue
            counts, paused = result
            if counts == followed.counts and paused == followed.paused:
                continue
            followed.counts, followed.paused = counts, paused
            await self._send(
                queue_group(followed.key),
                {"type": "queue.counts", "message": self._counts_message(followed)},
            )

    def _read_fleet(self) -> dict[str, Any]:
        if self._fleet is None:
            self._fleet = Fleet(self.redis_url, self.namespace)
        records = self._fleet.list_workers()
        return {
            "type": "workers",
            "hosts": fleet_reads.shown_records(records),
            "gpus": self._fleet.list_gpus(),
            # The GPU page's scaling table: workers running per host/queue.
            "running": fleet_reads.running_workers(records),
        }

    async def _send_workers(self) -> None:
        now = time.monotonic()
        self._workers_dirty = False
        self._workers_min_at = now + defaults.WORKERS_MIN_INTERVAL_S
        self._workers_max_at = now + defaults.WORKERS_MAX_INTERVAL_S
        self.stats.fleet_reads += 1
        snapshot = await asyncio.to_thread(self._read_fleet)
        self.workers_snapshot = snapshot
        await self._send(WORKERS_GROUP, {"type": "workers.update", "message": snapshot})

    # --- odd cases --------------------------------------------------------------------
    async def _drop_broken(self, by_stream: dict[str, Followed]) -> None:
        """Stop following keys that are not streams (one would fail every read)."""
        for stream, followed in by_stream.items():
            kind = await self.side.type(stream)
            if kind not in ("stream", "none"):
                log.warning("%s is a %s, not a stream: not followed", stream, kind)
                self.followed.pop(followed.key, None)

    async def _trimmed_since(self, events: str, after_id: str) -> bool:
        """Whether entries after `after_id` may have been trimmed away: the id
        is older than the stream's first entry and the stream lost entries."""
        try:
            info = await self.side.xinfo_stream(events)
        except ResponseError:
            return False
        first = info.get("first-entry")
        if not first or id_key(first[0]) <= id_key(after_id):
            return False
        added = info.get("entries-added")
        if added is None:  # Redis < 7 does not say; only "0-0" is surely whole
            return after_id != "0-0"
        return int(added) > int(info.get("length", 0))


_readers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EventsReader] = (
    weakref.WeakKeyDictionary()
)


def get_reader() -> EventsReader:
    """This process's (this event loop's) reader, made on first use."""
    from django.conf import settings

    loop = asyncio.get_running_loop()
    reader = _readers.get(loop)
    if reader is None:
        reader = EventsReader(
            settings.REDIS_URL,
            settings.BULLPEN_PREFIXES,
            settings.BULLPEN_NAMESPACE,
            max_queues=settings.BULLPEN_LIVE_MAX_QUEUES_PER_PROCESS,
        )
        _readers[loop] = reader
    return reader


async def reset_reader() -> None:
    """Stop and forget this loop's reader (tests change REDIS_URL between runs)."""
    reader = _readers.pop(asyncio.get_running_loop(), None)
    if reader is not None:
        await reader.stop()
