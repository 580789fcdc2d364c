"""The hub: this process's one member of the channel-layer groups.

channels-redis makes every consumer a channel of its own, and each message to
a group is then received, unpacked and dispatched once per consumer; with a
few hundred sockets that per-socket machinery costs more than the sockets'
own sends. So sockets do not join groups themselves: the hub joins
`q.<sha1>` / `workers` for as long as one local socket follows them, receives
each group message once, encodes every browser message in it once, and hands
it to the local sockets in memory (`deliver`). The channel layer still carries
every message between processes, so any process (or any code) that sends to a
group reaches the sockets of every dashboard process.

Messages are routed by their content: `workers.*` to the `workers` group's
sockets, one naming its `group` to that group (a session's or a user's
sockets, see access.py), anything else by its `queue` (or `message.queue`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from typing import Any, Protocol, cast

from channels.layers import get_channel_layer

from .messages import WORKERS_GROUP, queue_group

log = logging.getLogger(__name__)

#: channels-redis forgets group members after its group_expiry (a day by
#: default); the hub re-joins its groups this often.
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


def group_of(message: dict[str, Any]) -> str | None:
    """The group a message was sent to, from what it says."""
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


class Hub:
    """Joins groups for local sockets and hands their messages over in memory."""

    def __init__(self, layer: GroupLayer | None = None) -> None:
        # Settings always configure the default layer; its stub's new_channel
        # takes no prefix, though every implementation does.
        self.layer = (
            layer if layer is not None else cast(GroupLayer, get_channel_layer())
        )
        self.channel: str | None = None
        self.members: dict[str, set[Member]] = {}
        self.received = 0
        self.delivered = 0
        self._task: asyncio.Task[None] | None = None
        self._refreshed = time.monotonic()
        self._stopping = False

    async def join(self, group: str, member: Member) -> None:
        """Give `member` the group's messages (joining it on the first member)."""
        if self.channel is None:
            self.channel = await self.layer.new_channel("bullpen-hub.")
        found = self.members.setdefault(group, set())
        if not found:
            await self.layer.group_add(group, self.channel)
        found.add(member)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="bullpen-live-hub"
            )

    async def leave(self, group: str, member: Member) -> None:
        """Stop giving `member` the group's messages (leaving it after the last)."""
        found = self.members.get(group)
        if not found or member not in found:
            return
        found.discard(member)
        if not found:
            del self.members[group]
            if self.channel is not None:
                await self.layer.group_discard(group, self.channel)

    def route(self, message: dict[str, Any]) -> None:
        """Hand one group message to the local sockets of its group."""
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
                self.route(message)
            except Exception:  # noqa: BLE001 - one bad message must not stop the hub
                log.exception("live hub: could not route %r", message.get("type"))
            if time.monotonic() - self._refreshed > GROUP_REFRESH_S:
                self._refreshed = time.monotonic()
                for group in list(self.members):
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
