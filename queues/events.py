"""A queue's events stream (docs/protocol.md §5): the event names, stream ids, one
parser of its entries, and `QueueEvents` (sync iterator) / `AsyncQueueEvents`
(async iterator) that follow it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from . import codec, defaults
from .clients import QUEUE_EVENTS_SUFFIX, connection_name
from .cluster import check_for
from .connection import ConnectionLike, async_client, for_blocking, sync_client
from .keys import QueueKeys
from .names import check_queue_name


class EventName(StrEnum):
    """The `event` field of an events-stream entry, as BullMQ 6.7.0 writes them."""

    ACTIVE = "active"
    ADDED = "added"
    CLEANED = "cleaned"
    COMPLETED = "completed"
    DEBOUNCED = "debounced"
    DEDUPLICATED = "deduplicated"
    DELAYED = "delayed"
    DRAINED = "drained"
    DUPLICATED = "duplicated"
    FAILED = "failed"
    PAUSED = "paused"
    PROGRESS = "progress"
    REMOVED = "removed"
    RESUMED = "resumed"
    RETRIES_EXHAUSTED = "retries-exhausted"
    STALLED = "stalled"
    WAITING = "waiting"
    WAITING_CHILDREN = "waiting-children"


#: Events after which a job changes no more (a follower may stop there).
FINAL_EVENTS = frozenset({EventName.COMPLETED, EventName.FAILED, EventName.REMOVED})

_STREAM_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")


class StreamId(NamedTuple):
    """A Redis stream id `<ms>-<seq>`, ordered as Redis orders them."""

    ms: int
    seq: int

    @classmethod
    def parse(cls, value: Any) -> StreamId:
        """The id in `value` (`<ms>-<seq>`, or `<ms>` for `<ms>-0`); ValueError
        for anything else, or a part past 2**64 - 1."""
        text = value.decode() if isinstance(value, bytes) else value
        if (
            isinstance(text, str)
            and text.isascii()
            and text.isdigit()
            and len(text) <= 20
        ):
            text += "-0"
        match = _STREAM_ID.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"not a stream id: {value!r}")
        ms, seq = int(match[1]), int(match[2])
        if max(ms, seq) >= 2**64:
            raise ValueError(f"stream id out of range: {value!r}")
        return cls(ms, seq)

    @classmethod
    def valid(cls, value: Any) -> bool:
        """Whether `value` is a full stream id (`<ms>-<seq>`, in range)."""
        if not isinstance(value, str) or "-" not in value:
            return False
        try:
            cls.parse(value)
        except ValueError:
            return False
        return True

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"


def id_order(stream_id: str) -> StreamId:
    """A sort key for stream ids (`sorted(ids, key=id_order)`)."""
    return StreamId.parse(stream_id)


def parse_entry(stream_id: Any, raw: dict[Any, Any]) -> QueueEvent:
    """One events-stream entry (as XREAD/XRANGE return it, str or bytes) as a
    `QueueEvent`."""
    sid = stream_id.decode() if isinstance(stream_id, bytes) else str(stream_id)
    fields = {
        (k.decode() if isinstance(k, bytes) else str(k)): (
            v.decode(errors="replace") if isinstance(v, bytes) else str(v)
        )
        for k, v in raw.items()
    }
    return QueueEvent.parse(sid, fields)


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
        check_for(self.client, prefix, self.keys.name)

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
        check_for(self.client, prefix, self.keys.name)

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
