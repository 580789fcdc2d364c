"""The hub: hands live messages to this process's sockets, in memory.

The events reader of this process calls `route` with what it read (a queue's
events or counts, a worker snapshot); the hub encodes each browser message
once and hands it to the local sockets of its group (`deliver`). Events never
go back through Redis on their way to a socket: each process reads the
streams its own sockets follow once, however many sockets and dashboard
processes there are, and a socket gets each event once.

Only control messages cross processes: access.py sends `session.ended` /
`access.changed` to a session's or a user's group on the channel layer, from
whichever process saw the logout or the change. For those groups
(`join_shared`) the hub is this process's one channel-layer member: it
receives each message once and routes it like the rest. (channels-redis would
otherwise make every socket a channel of its own, received and dispatched
once per socket.)

Groups: `q.<sha1 of the queue key>` and `workers` (local), `s.<sha1 of a
session key>` and `u.<user pk>` (shared). Messages are routed by their
content: `workers.*` to `workers`, one naming its `group` to that group,
anything else by its `queue` (or `message.queue`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import weakref
from functools import cache
from typing import Any, Protocol, cast

from channels.layers import InMemoryChannelLayer, get_channel_layer

log = logging.getLogger(__name__)

WORKERS_GROUP = "workers"
#: channels-redis forgets group members after its group_expiry (a day by
#: default); the hub re-joins its shared groups this often.
GROUP_REFRESH_S = 3600.0
RETRY_MAX_S = 5.0
#: Longest `stop` waits for the receiving task to end.
STOP_WAIT_S = 2.0


class Member(Protocol):
    """A local socket: takes a group message without blocking."""

    def deliver(self, message: dict[str, Any]) -> None:
        """Queue one group message for this socket."""
        ...


class GroupLayer(Protocol):
    """What the hub uses of a channel layer (channels-redis's, or in-memory)."""

    async def new_channel(self, prefix: str = ...) -> str:
        """A new channel name, unique to this process, starting with `prefix`."""
        ...

    async def receive(self, channel: str) -> dict[str, Any]:
        """The next message sent to `channel` (waiting for one)."""
        ...

    async def group_add(self, group: str, channel: str) -> None:
        """Make `channel` a member of `group`."""
        ...

    async def group_discard(self, group: str, channel: str) -> None:
        """Remove `channel` from `group`."""
        ...

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send `message` to every channel of `group`."""
        ...


def queue_group(queue_key: str) -> str:
    """The group of a queue's followers: `q.<sha1 of prefix:name>`."""
    return "q." + hashlib.sha1(queue_key.encode()).hexdigest()


def group_of(message: dict[str, Any]) -> str | None:
    """The group a message is for, from what it says."""
    kind = str(message.get("type", ""))
    if kind.startswith("workers."):
        return WORKERS_GROUP
    group = message.get("group")
    if isinstance(group, str):
        return group
    queue = message.get("queue")
    if queue is None and isinstance(message.get("message"), dict):
        queue = message["message"].get("queue")
    return queue_group(queue) if isinstance(queue, str) else None


def encode(message: dict[str, Any]) -> str:
    """A browser message as the text frame sent for it."""
    return json.dumps(message, separators=(",", ":"))


@cache
def _memory_layer() -> InMemoryChannelLayer:
    return InMemoryChannelLayer()


def control_layer() -> GroupLayer:
    """The channel layer carrying control messages: CHANNEL_LAYERS' default
    one; where none is set (a host project without channels-redis), one in
    this process's memory, so that other processes' sockets learn of a
    logout at their next access check (bullpen.W002). (Its stub's
    new_channel takes no prefix, though every implementation does.)"""
    return cast(GroupLayer, get_channel_layer() or _memory_layer())


class Hub:
    """Hands messages to the local sockets of their group; joins the channel
    layer's groups that carry control messages between processes."""

    def __init__(self, layer: GroupLayer | None = None) -> None:
        self._layer = layer
        self.channel: str | None = None
        self.members: dict[str, set[Member]] = {}
        #: Groups this process is a channel-layer member of (for local members).
        self.shared: set[str] = set()
        self.received = 0
        self.delivered = 0
        self._task: asyncio.Task[None] | None = None
        # Joining and leaving the layer's groups, one at a time: sockets that
        # connect together must not each join (a connection to Redis apiece).
        self._layer_lock = asyncio.Lock()
        self._refreshed = time.monotonic()
        self._stopping = False

    @property
    def layer(self) -> GroupLayer:
        """The channel layer of control messages (see control_layer)."""
        if self._layer is None:
            self._layer = control_layer()
        return self._layer

    def join(self, group: str, member: Member) -> None:
        """Give `member` the messages this process routes to `group`."""
        self.members.setdefault(group, set()).add(member)

    async def join_shared(self, group: str, member: Member) -> None:
        """Give `member` the group's messages, sent from any process (joining
        the channel-layer group with the first local member)."""
        async with self._layer_lock:
            if group not in self.shared:
                if self.channel is None:
                    self.channel = await self.layer.new_channel("bullpen-hub.")
                await self.layer.group_add(group, self.channel)
                self.shared.add(group)
                if self._task is None or self._task.done():
                    self._task = asyncio.get_running_loop().create_task(
                        self._run(), name="bullpen-live-hub"
                    )
            self.join(group, member)

    async def leave(self, group: str, member: Member) -> None:
        """Stop giving `member` the group's messages (leaving a shared group
        after its last local member)."""
        found = self.members.get(group)
        if not found or member not in found:
            return
        found.discard(member)
        if found:
            return
        del self.members[group]
        if group not in self.shared:
            return
        async with self._layer_lock:
            # A socket may have joined again while this one waited.
            if group in self.shared and not self.members.get(group):
                self.shared.discard(group)
                if self.channel is not None:
                    await self.layer.group_discard(group, self.channel)

    def route(self, message: dict[str, Any]) -> None:
        """Hand one message to the local sockets of its group."""
        self.received += 1
        group = group_of(message)
        members = self.members.get(group) if group else None
        if not members:
            return
        if message.get("type") == "queue.events":
            message["texts"] = [encode(m) for m in message["events"]]
        for member in list(members):
            member.deliver(message)
        self.delivered += len(members)

    async def stop(self) -> None:
        """Stop receiving (tests, shutdown)."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True
            task.cancel()
            # Bounded, and the loop also checks `_stopping`: a cancel that lands
            # inside channels-redis's receive can be swallowed there (seen as a
            # redis TimeoutError instead), which would keep the loop going.
            done, _ = await asyncio.wait({task}, timeout=STOP_WAIT_S)
            if not done:
                log.warning("live hub: receive did not stop in %.0fs", STOP_WAIT_S)
            elif not task.cancelled() and task.exception() is not None:
                log.debug("live hub ended with %r", task.exception())

    async def _run(self) -> None:
        backoff = 0.1
        while not self._stopping:
            try:
                assert self.channel is not None
                message = await self.layer.receive(self.channel)
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep serving after Redis blips
                log.warning("live hub: %r (retrying in %.1fs)", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)
                continue
            try:
                # Only control messages travel the layer: nothing it carries
                # reaches a group the hub did not join there.
                if group_of(message) in self.shared:
                    self.route(message)
            except Exception:  # noqa: BLE001 - one bad message must not stop the hub
                log.exception("live hub: could not route %r", message.get("type"))
            if time.monotonic() - self._refreshed > GROUP_REFRESH_S:
                self._refreshed = time.monotonic()
                for group in list(self.shared):
                    await self.layer.group_add(group, self.channel)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = (
    weakref.WeakKeyDictionary()
)


def get_hub() -> Hub:
    """This process's (this event loop's) hub, made on first use."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        hub = _hubs[loop] = Hub()
    return hub


async def reset_hub() -> None:
    """Stop and forget this loop's hub (tests)."""
    hub = _hubs.pop(asyncio.get_running_loop(), None)
    if hub is not None:
        await hub.stop()
