"""Following a queue's events stream (wire spec 5): `QueueEvents` (sync
iterator) and `AsyncQueueEvents` (async iterator), yielding typed events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import codec, defaults
from .clients import QUEUE_EVENTS_SUFFIX, connection_name
from .connection import ConnectionLike, async_client, for_blocking, sync_client
from .keys import QueueKeys
from .queue import check_queue_name


@dataclass(frozen=True)
class QueueEvent:
    """One entry of the events stream: its stream id, event name and fields.

    `progress.data` and `completed.returnvalue` are parsed from JSON and
    `delayed.delay` is an int, as Node's QueueEvents does.
    """

    id: str
    event: str
    job_id: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, stream_id: str, raw: dict[str, str]) -> QueueEvent:
        """Build an event from a stream entry."""
        fields: dict[str, Any] = dict(raw)
        event = fields.pop("event", "")
        job_id = fields.pop("jobId", None)
        for name in ("data", "returnvalue"):
            if name in fields and event in ("progress", "completed"):
                try:
                    fields[name] = codec.loads(fields[name])
                except codec.JSONDecodeError:
                    pass
        for name in ("delay", "attemptsMade", "count"):
            if name in fields:
                try:
                    fields[name] = int(float(fields[name]))
                except ValueError:
                    pass
        return cls(stream_id, event, job_id, fields)


def _connection_name(keys: QueueKeys) -> str:
    return connection_name(keys.prefix, keys.name, QUEUE_EVENTS_SUFFIX)


class _EventsReader:
    """What both readers share: where they are in the stream and the parsing."""

    #: The reader's own client (sync or asyncio, see the subclasses).
    client: Any

    def __init__(
        self,
        name: str,
        prefix: str = defaults.PREFIX,
        last_id: str = "$",
        block_ms: int = defaults.EVENTS_BLOCK_MS,
    ) -> None:
        self.keys = QueueKeys(check_queue_name(name), prefix)
        self.last_id = last_id
        self.block_ms = block_ms
        self._closed = False

    def _xread_args(self, count: int, block_ms: int | None) -> dict[str, Any]:
        block = self.block_ms if block_ms is None else block_ms
        # The connection must outwait the block (redis-py 8 reads with 5 s).
        self.client = for_blocking(self.client, block / 1000)
        return {
            "streams": {self.keys.events: self.last_id},
            "count": count,
            "block": block,
        }

    def _accept(self, reply: Any) -> list[QueueEvent]:
        """Parse an XREAD reply and advance `last_id` past it."""
        events = [
            QueueEvent.parse(i, f) for _, entries in reply or [] for i, f in entries
        ]
        if events:
            self.last_id = events[-1].id
        return events

    @staticmethod
    def _last_generated(info: Any) -> str:
        # "$" is resolved once to the stream's last id, so no event is missed
        # between two reads (XREAD with "$" would skip them).
        return str(info["last-generated-id"]) if info else "0-0"


class QueueEvents(_EventsReader):
    """Follow a queue's events from `last_id` ("$" = only new ones) as an iterator."""

    def __init__(
        self,
        name: str,
        connection: ConnectionLike = None,
        prefix: str = defaults.PREFIX,
        last_id: str = "$",
        block_ms: int = defaults.EVENTS_BLOCK_MS,
    ) -> None:
        super().__init__(name, prefix, last_id, block_ms)
        self.client = for_blocking(sync_client(connection), block_ms / 1000)

    def read(self, count: int = 100, block_ms: int | None = None) -> list[QueueEvent]:
        """Read the events after `last_id` (blocking up to block_ms) and advance."""
        if self.last_id == "$":
            exists = self.client.exists(self.keys.events)
            info = self.client.xinfo_stream(self.keys.events) if exists else None
            self.last_id = self._last_generated(info)
        return self._accept(self.client.xread(**self._xread_args(count, block_ms)))

    def __iter__(self) -> Iterator[QueueEvent]:
        self.client.client_setname(_connection_name(self.keys))
        while not self._closed:
            yield from self.read()

    def close(self) -> None:
        """Stop iterating (after the current block) and close the connection."""
        self._closed = True
        self.client.close()


class AsyncQueueEvents(_EventsReader):
    """Follow a queue's events from `last_id` as an async iterator."""

    def __init__(
        self,
        name: str,
        connection: ConnectionLike = None,
        prefix: str = defaults.PREFIX,
        last_id: str = "$",
        block_ms: int = defaults.EVENTS_BLOCK_MS,
    ) -> None:
        super().__init__(name, prefix, last_id, block_ms)
        self.client = for_blocking(async_client(connection), block_ms / 1000)

    async def read(
        self, count: int = 100, block_ms: int | None = None
    ) -> list[QueueEvent]:
        """Read the events after `last_id` (blocking up to block_ms) and advance."""
        if self.last_id == "$":
            exists = await self.client.exists(self.keys.events)
            info = await self.client.xinfo_stream(self.keys.events) if exists else None
            self.last_id = self._last_generated(info)
        reply = await self.client.xread(**self._xread_args(count, block_ms))
        return self._accept(reply)

    async def __aiter__(self) -> AsyncIterator[QueueEvent]:
        await self.client.client_setname(_connection_name(self.keys))
        while not self._closed:
            for event in await self.read():
                yield event

    async def close(self) -> None:
        """Stop iterating and close the connection."""
        self._closed = True
        await self.client.aclose()
