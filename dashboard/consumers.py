"""The live-updates socket (`/ws/live/`, one per page): docs/dashboard-design.md.

A socket needs a logged-in session with the view permission (the Origin is
checked in asgi.py). It sends `subscribe`; the server joins the channel-layer
groups of what it follows, makes this process's events reader follow them,
replays what a reconnecting browser missed (bounded), and then forwards what
the reader fans out: events, progress (at most 10 a second per job, latest
wins), counts and worker snapshots. Handlers are named after the channel-layer
message types (`queue.events` -> `queue_events`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from dashboard.live import defaults, subscriptions
from dashboard.live.coalesce import Coalescer
from dashboard.live.messages import FINAL_EVENTS, WORKERS_GROUP, id_key, queue_group
from dashboard.live.reader import get_reader
from dashboard.models import VIEW

log = logging.getLogger(__name__)

#: Close codes (4000-4999 are the application's): no session, no permission.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
#: channels-redis forgets group members after its group_expiry (a day by default);
#: a socket re-joins its groups this often so long-lived pages keep updating.
GROUP_REFRESH_S = 3600.0
#: Per-job progress floors kept per socket before the oldest are dropped.
_FLOORS_MAX = 5_000


class LiveConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """One page's socket: subscribe, replay, then forward live messages."""

    async def connect(self) -> None:
        """Accept only a logged-in user allowed to view queues."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(user.has_perm)(VIEW):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.reader = get_reader()
        self.sub = subscriptions.Subscription()
        #: Highest stream id of a non-progress event sent, per queue.
        self.floors: dict[str, tuple[int, int]] = {}
        #: Highest stream id of a progress sent, per (queue, job).
        self.progress_floors: dict[tuple[str, str | None], tuple[int, int]] = {}
        self.coalescer = Coalescer(defaults.PROGRESS_INTERVAL_S)
        self._flush_handle: asyncio.TimerHandle | None = None
        self._closed = False
        self._refresh = asyncio.get_running_loop().create_task(self._refresh_groups())
        await self.accept()

    async def disconnect(self, code: int) -> None:
        """Leave every group and let the reader stop following."""
        if not hasattr(self, "sub"):
            return
        self._closed = True
        self._refresh.cancel()
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        await self._apply(subscriptions.Subscription())

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Browser -> server: only `subscribe`."""
        if isinstance(content, dict) and content.get("type") == "subscribe":
            await self.subscribe(content)
        else:
            await self.send_json({"type": "error", "message": "expected a subscribe"})

    # --- subscribing ------------------------------------------------------------------
    async def subscribe(self, content: dict[str, Any]) -> None:
        """Follow what the message asks (replacing any earlier subscription)."""
        try:
            sub = subscriptions.parse(content, settings.BULLPEN_PREFIXES)
        except subscriptions.SubscriptionError as exc:
            await self.send_json({"type": "error", "message": str(exc)})
            return
        for reason in sub.rejected:
            await self.send_json({"type": "error", "message": reason})
        await self._apply(sub)
        for queue, after in sub.last_ids.items():
            await self._replay(queue, after)
        for queue in sorted(sub.queues):
            counts = self.reader.counts_message(queue)
            if counts is not None:
                await self.send_json(counts)
        if sub.gpus and self.reader.workers_snapshot is not None:
            await self.send_json(self.reader.workers_snapshot)

    async def _apply(self, new: subscriptions.Subscription) -> None:
        """Join and leave groups (before the reader follows, so nothing is lost)."""
        old = self.sub
        layer = self.channel_layer
        for queue in sorted(new.streams - old.streams):
            await layer.group_add(queue_group(queue), self.channel_name)
            await self.reader.follow(queue)
        for queue in sorted(old.streams - new.streams):
            await layer.group_discard(queue_group(queue), self.channel_name)
            await self.reader.release(queue)
            self.floors.pop(queue, None)
        if new.gpus and not old.gpus:
            await layer.group_add(WORKERS_GROUP, self.channel_name)
            await self.reader.follow_workers()
        elif old.gpus and not new.gpus:
            await layer.group_discard(WORKERS_GROUP, self.channel_name)
            await self.reader.release_workers()
        self.sub = new

    async def _replay(self, queue: str, after: str) -> None:
        """Send what came after the browser's last id (the newest, bounded)."""
        found, truncated = await self.reader.replay(queue, after)
        sent = 0
        for message in found:
            self._raise_floor(message)
            if self.sub.wants(queue, message.get("job")):
                await self.send_json({**message, "replayed": True})
                sent += 1
        await self.send_json(
            {"type": "replayed", "queue": queue, "count": sent, "truncated": truncated}
        )

    async def _refresh_groups(self) -> None:
        while True:
            await asyncio.sleep(GROUP_REFRESH_S)
            for queue in self.sub.streams:
                await self.channel_layer.group_add(queue_group(queue), self.channel_name)
            if self.sub.gpus:
                await self.channel_layer.group_add(WORKERS_GROUP, self.channel_name)

    # --- what the reader sends (channel-layer message types) -------------------------
    async def queue_events(self, event: dict[str, Any]) -> None:
        """A batch of one queue's events: filter, drop repeats, coalesce progress."""
        queue = event["queue"]
        for message in event["events"]:
            job = message.get("job")
            if not self.sub.wants(queue, job) or not self._raise_floor(message):
                continue
            key = (queue, job)
            if message["type"] == "progress":
                if self.coalescer.offer(key, message) is not None:
                    await self.send_json(message)
                else:
                    self._schedule_flush()
                continue
            held = self.coalescer.take(key)
            if held is not None:
                await self.send_json(held)
            if message.get("event") in FINAL_EVENTS:
                self.coalescer.forget(key)
                self.progress_floors.pop(key, None)
            await self.send_json(message)

    async def queue_counts(self, event: dict[str, Any]) -> None:
        """A followed queue's counts changed."""
        message = event["message"]
        if message["queue"] in self.sub.queues:
            await self.send_json(message)

    async def workers_update(self, event: dict[str, Any]) -> None:
        """A new snapshot of workers and GPUs."""
        if self.sub.gpus:
            await self.send_json(event["message"])

    # --- helpers ----------------------------------------------------------------------
    def _raise_floor(self, message: dict[str, Any]) -> bool:
        """Record a message's id; False when it was already sent (a replay
        overlapping live events, or a second server process's reader)."""
        mid = id_key(message["id"])
        if message["type"] == "progress":
            key = (message["queue"], message.get("job"))
            floor = self.progress_floors.get(key)
            if floor is not None and mid <= floor:
                return False
            self.progress_floors[key] = mid
            if len(self.progress_floors) > _FLOORS_MAX:
                for old in list(self.progress_floors)[: _FLOORS_MAX // 2]:
                    del self.progress_floors[old]
            return True
        floor = self.floors.get(message["queue"])
        if floor is not None and mid <= floor:
            return False
        self.floors[message["queue"]] = mid
        return True

    def _schedule_flush(self) -> None:
        if self._flush_handle is not None:
            return
        delay = self.coalescer.next_due_s()
        if delay is None:
            return
        loop = asyncio.get_running_loop()
        self._flush_handle = loop.call_later(
            delay, lambda: loop.create_task(self._flush())
        )

    async def _flush(self) -> None:
        self._flush_handle = None
        if self._closed:
            return
        for message in self.coalescer.due():
            await self.send_json(message)
        self._schedule_flush()
