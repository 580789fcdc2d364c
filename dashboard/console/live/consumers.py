"""The live-updates socket (`/ws/live/`, one per page): docs/dashboard-design.md.

A socket needs a logged-in session with the view permission (the Origin is
checked in asgi.py), and keeps it only while both hold: logging out closes it,
and it checks its session and permission again on every subscribe and
periodically (dashboard/console/live/access.py). It sends `subscribe`; the server
makes this process's events reader follow what it asks of the queues that
exist (at most `conf.live_max_queues_per_socket` per socket and
`conf.live_max_queues_per_process` per process), replays what a reconnecting
browser missed (bounded), and then forwards what the reader hands this
process's hub (dashboard/console/live/hub.py): events, progress (coalesced by the
reader alone, at most 10 a second per job, latest wins; a socket forwards
what it gets), counts and worker snapshots; and the control messages of
access.py, which the hub receives from the channel layer. Handlers are named
after the message types by channels' own `get_handler_name` (`queue.events`
-> `queue_events`; a type starting with `_` is never dispatched).

When a socket has more than one message ready at once (a burst, or a browser
a little behind), they go out in one frame, `{"type": "batch", "messages":
[...]}`, each message as the contract shapes it; live.js applies them in
order. Under load this keeps the number of frames (the main cost per socket)
well below the number of events. That is also the flow control of a slow
socket: the further behind it is, the more messages one frame gathers (at
most `_DRAIN_MAX`), and past `INBOX_MAX` waiting ones new ones are dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from dashboard.console.models import VIEW
from dashboard.shared import conf, discovery
from dashboard.shared.redis import REDIS_DOWN
from queues.events import FINAL_EVENTS, StreamId, id_order

from . import access, defaults, replay, subscriptions
from .access import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from .hub import WORKERS_GROUP, encode, get_hub, queue_group
from .reader import get_reader

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
#: The message types the hub hands a socket (each to the handler named after it).
HANDLED_TYPES = frozenset(
    {
        "queue.events",
        "queue.counts",
        "workers.update",
        "session.ended",
        "access.changed",
    }
)


def batch_frame(texts: list[str]) -> str:
    """Several encoded messages as one `batch` frame (no re-encoding)."""
    return '{"type":"batch","messages":[' + ",".join(texts) + "]}"


def handler_name(kind: Any) -> str | None:
    """The handler of a message type the hub hands a socket, by channels'
    `get_handler_name` (`queue.events` -> `queue_events`; it refuses a type
    starting with `_`), or None for a type the socket does not handle."""
    if not isinstance(kind, str) or kind not in HANDLED_TYPES:
        return None
    name: str = get_handler_name({"type": kind})
    return name


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """One page's socket: subscribe, replay, then forward live messages."""

    # Sockets get messages from the hub, not a channel each (see hub.py):
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
        self.floors: dict[str, StreamId] = {}
        #: Highest stream id of a progress sent, per (queue, job).
        self.progress_floors: dict[tuple[str, str | None], StreamId] = {}
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue(INBOX_MAX)
        self.dropped = 0
        # Subscribing (with its replay) and forwarding never interleave.
        self._lock = asyncio.Lock()
        self._closed = False
        #: The texts of the frame being gathered.
        self._out: list[str] = []
        loop = asyncio.get_running_loop()
        self._pump = loop.create_task(self._pump_inbox())
        self._watch = loop.create_task(self._recheck_access())
        self.session = access.session_group(self.session_key or "")
        self.user_group = access.user_group(user.pk)
        await self.hub.join_shared(self.session, self)
        await self.hub.join_shared(self.user_group, self)
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
        """The hub hands over a message (never blocks)."""
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
                conf.get().prefixes,
                conf.get().live_max_queues_per_socket,
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
        configured = {ref.key for ref in discovery.configured_queues()}
        unknown = sub.streams - self.following - configured
        found = await replay.existing(self.reader.side, unknown, self.reader.prefixes)
        missing = unknown - found
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
            self.hub.join(queue_group(queue), self)
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
            self.hub.join(WORKERS_GROUP, self)
            await self.reader.follow_workers()
            self.following_gpus = True
        self.sub = new

    async def _replay(self, queue: str, after: str) -> None:
        """Send what came after the browser's last id (the newest, bounded)."""
        found, truncated = await replay.replay(
            self.reader.side, queue, self.reader.prefixes, after
        )
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
        """Forward messages in order; what is ready at once is one frame."""
        while True:
            ready = [await self.inbox.get()]
            while len(ready) < _DRAIN_MAX and not self.inbox.empty():
                ready.append(self.inbox.get_nowait())
            async with self._lock:
                if self._closed:
                    return
                for message in ready:
                    await self._dispatch(message)
                texts, self._out = self._out, []
                if self._closed:
                    return
                if len(texts) == 1:
                    await self.send(text_data=texts[0])
                elif texts:
                    await self.send(text_data=batch_frame(texts))

    async def _dispatch(self, message: dict[str, Any]) -> None:
        """Hand one hub message to the handler named after its type, if any.
        Not channels' `dispatch`: that one serves the socket's own ASGI
        messages, would also reach its `websocket_*` handlers, and closes old
        database connections (a thread hop) before every message."""
        name = handler_name(message.get("type"))
        if name is None:
            return
        try:
            await getattr(self, name)(message)
        except Exception:  # noqa: BLE001 - one bad message must not end the socket
            log.exception("live socket: %s failed", message.get("type"))

    # --- the message types the hub hands over --------------------------------------
    async def session_ended(self, event: dict[str, Any]) -> None:
        """The socket's session logged out (in any dashboard process)."""
        await self._end(CLOSE_UNAUTHENTICATED)

    async def access_changed(self, event: dict[str, Any]) -> None:
        """The user's permissions or groups changed: check again now."""
        code = await self._access()
        if code is not None:
            await self._end(code)

    async def queue_events(self, event: dict[str, Any]) -> None:
        """A batch of one queue's events (progress already coalesced by the
        reader): keep what this socket follows, drop repeats."""
        queue = event["queue"]
        texts = event.get("texts") or [None] * len(event["events"])
        for message, text in zip(event["events"], texts):
            job = message.get("job")
            if not self.sub.wants(queue, job) or not self._raise_floor(message):
                continue
            if message.get("event") in FINAL_EVENTS:
                self.progress_floors.pop((queue, job), None)
            self._send_text(message, text)

    async def queue_counts(self, event: dict[str, Any]) -> None:
        """A followed queue's counts changed."""
        message = event["message"]
        if message["queue"] in self.sub.queues:
            self._send_text(message)

    async def workers_update(self, event: dict[str, Any]) -> None:
        """A new snapshot of workers and GPUs."""
        if self.sub.gpus:
            self._send_text(event["message"])

    # --- helpers ----------------------------------------------------------------------
    def _send_text(self, message: dict[str, Any], text: str | None = None) -> None:
        """Add a message to the frame being gathered."""
        self._out.append(text if text is not None else encode(message))

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        """Compact JSON, as the hub encodes shared messages."""
        return json.dumps(content, separators=(",", ":"))

    def _raise_floor(self, message: dict[str, Any]) -> bool:
        """Record a message's id; False when it was already sent (a replay
        overlapping live events)."""
        mid = id_order(message["id"])
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
