"""The live-updates socket (`/ws/live/`, one per page): docs/dashboard-design.md.

A socket needs a logged-in session with the view permission (the Origin is
checked in asgi.py), and keeps it only while both hold: logging out closes it,
and it checks its session and permission again on every subscribe and
periodically (dashboard/live/access.py). It sends `subscribe`; the server
makes this process's events reader follow what it asks of the queues that
exist (at most BULLPEN_LIVE_MAX_QUEUES_PER_SOCKET per socket and
BULLPEN_LIVE_MAX_QUEUES_PER_PROCESS per process), replays what a reconnecting
browser missed (bounded), and then forwards what the reader fans out through the channel
layer: events, progress (at most 10 a second per job, latest wins), counts and
worker snapshots. Group messages reach the socket through the process's hub
(dashboard/live/hub.py), which is the one channel-layer member per process;
handlers are named after the channel-layer message types
(`queue.events` -> `queue_events`).

When a socket has more than one message ready at once (a burst, or a browser
a little behind), they go out in one frame, `{"type": "batch", "messages":
[...]}`, each message as the contract shapes it; live.js applies them in
order. Under load this keeps the number of frames (the main cost per socket)
well below the number of events.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from dashboard import readmodel
from dashboard.live import access, defaults, subscriptions
from dashboard.live.access import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from dashboard.live.coalesce import Coalescer
from dashboard.live.hub import encode, get_hub
from dashboard.live.messages import FINAL_EVENTS, WORKERS_GROUP, id_key, queue_group
from dashboard.live.reader import get_reader
from dashboard.models import VIEW
from dashboard.readmodel import REDIS_DOWN

log = logging.getLogger(__name__)

__all__ = ["CLOSE_FORBIDDEN", "CLOSE_UNAUTHENTICATED", "LiveConsumer"]
#: Why a socket that was open is closed, as its last message says.
_ENDED = {
    CLOSE_UNAUTHENTICATED: "the session ended (logged out or expired): log in again",
    CLOSE_FORBIDDEN: "this user may no longer view queues",
}
#: Redis did not answer a subscribe: reconnect later (RFC 6455 "Try Again Later").
CLOSE_TRY_AGAIN = 1013
#: Group messages a socket may have waiting; beyond that (a browser that does
#: not read) new ones are dropped, as a slow reader cannot use them anyway.
INBOX_MAX = 2_000
#: Per-job progress floors kept per socket before the oldest are dropped.
_FLOORS_MAX = 5_000
#: Group messages taken from the inbox at once (their output is one frame).
_DRAIN_MAX = 50


def batch_frame(texts: list[str]) -> str:
    """Several encoded messages as one `batch` frame (no re-encoding)."""
    return '{"type":"batch","messages":[' + ",".join(texts) + "]}"


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """One page's socket: subscribe, replay, then forward live messages."""

    # Sockets get group messages from the hub, not a channel each (see hub.py):
    # no layer under this alias, so channels gives the socket none.
    channel_layer_alias = "bullpen-sockets-use-the-hub"

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
        self.hub = get_hub()
        self.user_pk = user.pk
        self.session_key: str | None = self.scope["session"].session_key
        self.sub = subscriptions.Subscription()
        #: Streams this socket has joined and the reader follows for it.
        self.following: set[str] = set()
        self.following_gpus = False
        #: Highest stream id of a non-progress event sent, per queue.
        self.floors: dict[str, tuple[int, int]] = {}
        #: Highest stream id of a progress sent, per (queue, job).
        self.progress_floors: dict[tuple[str, str | None], tuple[int, int]] = {}
        self.coalescer = Coalescer(defaults.PROGRESS_INTERVAL_S)
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue(INBOX_MAX)
        self.dropped = 0
        # Subscribing (with its replay) and forwarding never interleave.
        self._lock = asyncio.Lock()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._closed = False
        #: Texts of the frame being gathered (None: send each message at once).
        self._out: list[str] | None = None
        loop = asyncio.get_running_loop()
        self._pump = loop.create_task(self._pump_inbox())
        self._watch = loop.create_task(self._recheck_access())
        self.session = access.session_group(self.session_key or "")
        self.user_group = access.user_group(user.pk)
        await self.hub.join(self.session, self)
        await self.hub.join(self.user_group, self)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        """Stop following everything."""
        if not hasattr(self, "sub"):
            return
        self._pump.cancel()
        self._watch.cancel()
        await self._stop()

    async def _stop(self) -> None:
        """Forward nothing more and follow nothing (closing, or closed)."""
        self._closed = True
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        await self.hub.leave(self.session, self)
        await self.hub.leave(self.user_group, self)
        await self._apply(subscriptions.Subscription())

    async def _end(self, code: int) -> None:
        """Say why and close a socket whose user may no longer see it (with
        the lock held, so nothing else goes out after the reason)."""
        if self._closed:
            return
        await self._stop()
        await self.send_json({"type": "error", "message": _ENDED[code]})
        await self.close(code=code)

    async def _access(self) -> int | None:
        check = database_sync_to_async(access.check)
        result: int | None = await check(self.session_key, self.user_pk)
        return result

    async def _recheck_access(self) -> None:
        """Close the socket once its session or view permission is gone."""
        while not self._closed:
            await asyncio.sleep(defaults.ACCESS_RECHECK_S)
            try:
                code = await self._access()
            except Exception as exc:  # noqa: BLE001 - the next check may work
                log.warning("live socket: access check failed: %r", exc)
                continue
            if code is not None:
                async with self._lock:
                    await self._end(code)
                return

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Browser -> server: only `subscribe`."""
        if self._closed:
            return
        if isinstance(content, dict) and content.get("type") == "subscribe":
            try:
                async with self._lock:
                    code = await self._access()
                    if code is not None:
                        await self._end(code)
                        return
                    await self.subscribe(content)
            except REDIS_DOWN as exc:
                # The browser reconnects with backoff and resubscribes.
                log.warning("live socket: subscribe failed, Redis: %s", exc)
                await self.send_json(
                    {"type": "error", "message": f"Redis is not answering: {exc}"}
                )
                await self.close(code=CLOSE_TRY_AGAIN)
        else:
            await self.send_json({"type": "error", "message": "expected a subscribe"})

    def deliver(self, message: dict[str, Any]) -> None:
        """The hub hands over a group message (never blocks)."""
        if self._closed:
            return
        try:
            self.inbox.put_nowait(message)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("live socket %s is not keeping up: dropping", id(self))

    # --- subscribing ------------------------------------------------------------------
    async def subscribe(self, content: dict[str, Any]) -> None:
        """Follow what the message asks (replacing any earlier subscription)."""
        try:
            sub = subscriptions.parse(
                content,
                settings.BULLPEN_PREFIXES,
                settings.BULLPEN_LIVE_MAX_QUEUES_PER_SOCKET,
            )
        except subscriptions.SubscriptionError as exc:
            await self.send_json({"type": "error", "message": str(exc)})
            return
        await self._drop_missing(sub)
        await self._apply(sub)
        for reason in sub.rejected:
            await self.send_json({"type": "error", "message": reason})
        for queue, after in sub.last_ids.items():
            await self._replay(queue, after)
        for queue in sorted(sub.queues):
            counts = self.reader.counts_message(queue)
            if counts is not None:
                await self.send_json(counts)
        if sub.gpus and self.reader.workers_snapshot is not None:
            await self.send_json(self.reader.workers_snapshot)

    async def _drop_missing(self, sub: subscriptions.Subscription) -> None:
        """Take queues that do not exist (and are not configured) out of the
        subscription: a socket cannot make the reader follow arbitrary keys."""
        configured = {ref.key for ref in readmodel.configured_queues()}
        unknown = sub.streams - self.following - configured
        missing = unknown - await self.reader.existing(unknown)
        for queue in sorted(missing):
            sub.drop(queue, f"no queue {queue}: not followed")

    async def _apply(self, new: subscriptions.Subscription) -> None:
        """Join before the reader follows (so nothing between is lost); leave.
        `following` / `following_gpus` record only what took effect, so that
        a subscribe cut short by Redis is undone exactly on disconnect."""
        for queue in sorted(self.following - new.streams):
            self.following.discard(queue)
            await self.hub.leave(queue_group(queue), self)
            await self.reader.release(queue)
            self.floors.pop(queue, None)
        if self.following_gpus and not new.gpus:
            self.following_gpus = False
            await self.hub.leave(WORKERS_GROUP, self)
            await self.reader.release_workers()
        for queue in sorted(new.streams - self.following):
            await self.hub.join(queue_group(queue), self)
            try:
                await self.reader.follow(queue)
            except subscriptions.FollowRefused as exc:
                await self.hub.leave(queue_group(queue), self)
                new.drop(queue, str(exc))
                continue
            except BaseException:
                await self.hub.leave(queue_group(queue), self)
                raise
            self.following.add(queue)
        if new.gpus and not self.following_gpus:
            await self.hub.join(WORKERS_GROUP, self)
            await self.reader.follow_workers()
            self.following_gpus = True
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

    async def _pump_inbox(self) -> None:
        """Forward group messages in order; what is ready at once is one frame."""
        while True:
            ready = [await self.inbox.get()]
            while len(ready) < _DRAIN_MAX and not self.inbox.empty():
                ready.append(self.inbox.get_nowait())
            async with self._lock:
                if self._closed:
                    return
                self._out = []
                for message in ready:
                    kind = str(message.get("type", "")).replace(".", "_")
                    handler = getattr(self, kind, None)
                    if handler is None:
                        continue
                    try:
                        await handler(message)
                    except Exception:  # noqa: BLE001 - one bad message must not end it
                        log.exception("live socket: %s failed", message.get("type"))
                out, self._out = self._out, None
                if self._closed:
                    return
                if len(out) == 1:
                    await self.send(text_data=out[0])
                elif out:
                    await self.send(text_data=batch_frame(out))

    # --- what the reader sends (channel-layer message types) -------------------------
    async def session_ended(self, event: dict[str, Any]) -> None:
        """The socket's session logged out (in any dashboard process)."""
        await self._end(CLOSE_UNAUTHENTICATED)

    async def access_changed(self, event: dict[str, Any]) -> None:
        """The user's permissions or groups changed: check again now."""
        code = await self._access()
        if code is not None:
            await self._end(code)

    async def queue_events(self, event: dict[str, Any]) -> None:
        """A batch of one queue's events: filter, drop repeats, coalesce progress."""
        queue = event["queue"]
        texts = event.get("texts") or [None] * len(event["events"])
        for message, text in zip(event["events"], texts):
            job = message.get("job")
            if not self.sub.wants(queue, job) or not self._raise_floor(message):
                continue
            key = (queue, job)
            if message["type"] == "progress":
                if self.coalescer.offer(key, message) is not None:
                    await self._send_text(message, text)
                else:
                    self._schedule_flush()
                continue
            held = self.coalescer.take(key)
            if held is not None:
                await self._send_text(held)
            if message.get("event") in FINAL_EVENTS:
                self.coalescer.forget(key)
                self.progress_floors.pop(key, None)
            await self._send_text(message, text)

    async def queue_counts(self, event: dict[str, Any]) -> None:
        """A followed queue's counts changed."""
        message = event["message"]
        if message["queue"] in self.sub.queues:
            await self._send_text(message)

    async def workers_update(self, event: dict[str, Any]) -> None:
        """A new snapshot of workers and GPUs."""
        if self.sub.gpus:
            await self._send_text(event["message"])

    # --- helpers ----------------------------------------------------------------------
    async def _send_text(
        self, message: dict[str, Any], text: str | None = None
    ) -> None:
        text = text if text is not None else encode(message)
        if self._out is not None:
            self._out.append(text)
        else:
            await self.send(text_data=text)

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        """Compact JSON, as the hub encodes shared messages."""
        return json.dumps(content, separators=(",", ":"))

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
        async with self._lock:
            for message in self.coalescer.due():
                await self._send_text(message)
        self._schedule_flush()
