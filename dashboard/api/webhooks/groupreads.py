"""The dispatcher's XREADGROUP on a Redis Cluster: one blocking read per slot
group, all at once (one command may only name one slot's streams), on an
event loop of its own so that the sync dispatcher can wait on all of them
(queues/streamreads.py). On one server the dispatcher reads as before."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from redis.exceptions import ResponseError

from queues.connection import async_from_url
from queues.streamreads import BlockingReads


class GroupReads:
    """XREADGROUP BLOCK of a cluster's slot groups at once, from sync code."""

    def __init__(
        self, url: str, group: str, consumer: str, count: int, block_ms: int
    ) -> None:
        self.url = url
        self.group = group
        self.consumer = consumer
        self.count = count
        self.block_ms = block_ms
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reads: BlockingReads | None = None

    @property
    def reads(self) -> int:
        """Blocking reads sent so far (one per slot group per `read`)."""
        return 0 if self._reads is None else self._reads.reads

    def read(
        self, ids: dict[str, str], no_group: Callable[[str], None]
    ) -> tuple[list[Any], BaseException | None]:
        """The entries every group read (``[stream, entries]`` pairs) and the
        first error other than NOGROUP; `no_group(stream)` is called for each
        stream whose group is gone (the stream was deleted)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(self._read(ids, no_group))

    async def _read(
        self, ids: dict[str, str], no_group: Callable[[str], None]
    ) -> tuple[list[Any], BaseException | None]:
        if self._reads is None:
            side = async_from_url(
                self.url, decode_responses=True, encoding_errors="surrogateescape"
            )
            self._reads = BlockingReads(self.url, side, self.block_ms / 1000)

        async def xreadgroup(client: Any, group_ids: dict[str, str]) -> Any:
            return await client.xreadgroup(
                self.group,
                self.consumer,
                group_ids,
                count=self.count,
                block=self.block_ms,
            )

        replies: list[Any] = []
        error: BaseException | None = None
        for group in await self._reads.read(ids, xreadgroup):
            if group.error is None:
                replies.extend(group.reply)
            elif isinstance(group.error, ResponseError) and (
                "NOGROUP" in str(group.error)
            ):
                for stream in group.ids:
                    no_group(stream)
            else:
                error = error or group.error
        return replies, error

    def close(self) -> None:
        """Close the connections and the loop (a later read opens new ones)."""
        loop, reads, self._loop, self._reads = self._loop, self._reads, None, None
        if loop is None:
            return
        if reads is not None:
            loop.run_until_complete(reads.close())
            loop.run_until_complete(reads.side.aclose())
        loop.close()
