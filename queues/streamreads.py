"""Blocking reads of several streams at once, on one Redis or a Redis Cluster.

On one server one XREAD (or XREADGROUP) BLOCK names every stream. On a
cluster one command may only name keys of one slot (two slots give CROSSSLOT
even when one node holds both), so `BlockingReads` groups the streams by
slot: one blocking read per group, each on a connection of its own straight
to the primary holding that slot, all in flight together. Streams whose keys
share a hash tag (every queue under the prefix ``{bull}``) share one read;
queues tagged one per queue (``{render}``) need one read each
(docs/protocol.md §1.1, docs/operations.md "Redis Cluster").

As soon as one read returns, the others are woken with CLIENT UNBLOCK, sent
to the node holding that connection with that connection's id, so the caller
handles what came at once instead of waiting out the other reads' BLOCK;
`wake()` does the same for all of them (e.g. the caller's streams changed).
A wake is never lost to timing: one that comes before a read is sent makes
that read return at once, and an UNBLOCK that reaches the server before the
read it is meant for (it answers 0: nothing blocked) is sent again until the
read has returned. A busy machine lost such wakes, and each cost a whole
BLOCK.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from .cluster import is_cluster_client, slot_of
from .connection import BLOCKING_READ_MARGIN_S, async_from_url

log = logging.getLogger(__name__)

#: How long `wake` waits before it sends an UNBLOCK the server answered with
#: "not blocked" again (the read was sent but had not arrived yet).
UNBLOCK_RETRY_S = 0.005


def _unblocked(reply: Any) -> bool:
    """Whether CLIENT UNBLOCK's reply (1 / 0; a cluster client may give it
    per node) says a blocked client was unblocked."""
    if isinstance(reply, dict):
        return any(_unblocked(v) for v in reply.values())
    try:
        return int(reply) == 1
    except (TypeError, ValueError):
        return True  # unreadable: do not retry


#: One blocking read: (its own connection, {stream: id}) -> the reply.
Call = Callable[[Any, dict[str, str]], Awaitable[Any]]


@dataclass
class GroupRead:
    """What one group's read gave: its streams' ids and the reply (a list
    of ``[stream, entries]``), or the error it raised."""

    ids: dict[str, str]
    reply: list[Any] = field(default_factory=list)
    error: BaseException | None = None


@dataclass
class _Conn:
    client: Any
    ident: int
    node: Any = None  # the cluster node it is connected to (None: one server)
    blocked: bool = False


class BlockingReads:
    """Dedicated connections for blocking stream reads, one per slot group
    (one in all on a single server), and the means to wake them."""

    def __init__(self, url: str, side: Any, block_s: float) -> None:
        #: The URL the connections are made from (one server: as it says).
        self.url = url
        #: An asyncio client of the same Redis (plain or cluster): it finds
        #: a slot's node and sends CLIENT UNBLOCK, never blocks itself.
        self.side = side
        self.cluster = is_cluster_client(side)
        self.block_s = block_s
        #: Calls of `read`, and the blocking reads they asked for (one per
        #: group; one whose connection was still being made when another
        #: group's read returned is not sent).
        self.rounds = 0
        self.reads = 0
        self._conns: dict[int, _Conn] = {}
        self._relearn = False
        #: A wake came and the read in progress (or the next) has not yet
        #: returned for it.
        self._wake_pending = False

    def groups(self, streams: Iterable[str]) -> dict[int, list[str]]:
        """The streams by the group one read may name together (by slot on a
        cluster; one group, 0, on a single server)."""
        if not self.cluster:
            return {0: list(streams)}
        grouped: dict[int, list[str]] = {}
        for stream in streams:
            grouped.setdefault(slot_of(stream), []).append(stream)
        return grouped

    async def read(self, ids: dict[str, str], call: Call) -> list[GroupRead]:
        """One blocking read per group of `ids`' streams, all at once; when
        the first returns the others are woken. Each group's reply or error
        is in its `GroupRead` (the reads of other groups still count)."""
        grouped = self.groups(ids)
        for gone in set(self._conns) - set(grouped):
            await self._drop(gone)
        reads = [
            GroupRead({s: ids[s] for s in streams}) for streams in grouped.values()
        ]
        self.rounds += 1
        self.reads += len(reads)
        woken = asyncio.Event()
        try:
            if len(reads) == 1:
                await self._one(next(iter(grouped)), reads[0], call, woken)
                return reads
            tasks = [
                asyncio.create_task(self._one(key, group, call, woken))
                for key, group in zip(grouped, reads)
            ]
            try:
                _, pending = await asyncio.wait(
                    tasks, return_when=asyncio.FIRST_COMPLETED
                )
                if pending:
                    woken.set()  # one still connecting then reads nothing
                    await self._unblock()
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
            return reads
        finally:
            self._wake_pending = False  # the caller reads its streams anew

    async def _one(
        self, key: int, group: GroupRead, call: Call, woken: asyncio.Event
    ) -> None:
        try:
            conn = await self._conn(key, next(iter(group.ids)))
            if woken.is_set() or self._wake_pending:
                return  # another group's read came back, or a wake, meanwhile
            conn.blocked = True
            try:
                group.reply = list(await call(conn.client, group.ids) or [])
            finally:
                conn.blocked = False
        except asyncio.CancelledError:
            await self._drop(key)  # a read cut short leaves its reply unread
            raise
        except Exception as exc:  # noqa: BLE001 - the caller decides per group
            group.error = exc
            self._relearn = self.cluster
            await self._drop(key)

    async def wake(self) -> None:
        """Make the read in progress return now, or the next one at once if
        none is sent yet (CLIENT UNBLOCK of each connection's id, sent to its
        node)."""
        self._wake_pending = True
        await self._unblock()

    async def _unblock(self) -> None:
        """UNBLOCK every read in flight, again while the server says it is
        not blocked yet (sent, not arrived) and it has not returned: at most
        a BLOCK's worth of tries, a few ms apart."""
        for conn in list(self._conns.values()):
            tries = max(int(self.block_s / UNBLOCK_RETRY_S), 1)
            while conn.blocked and tries:
                tries -= 1
                try:
                    if conn.node is None:
                        done = await self.side.execute_command(
                            "CLIENT", "UNBLOCK", conn.ident
                        )
                    else:
                        done = await self.side.execute_command(
                            "CLIENT", "UNBLOCK", conn.ident, target_nodes=conn.node
                        )
                except Exception as exc:  # noqa: BLE001 - it returns at its BLOCK anyway
                    log.debug("CLIENT UNBLOCK failed: %r", exc)
                    break
                if _unblocked(done):
                    break
                await asyncio.sleep(UNBLOCK_RETRY_S)

    async def _conn(self, key: int, stream: str) -> _Conn:
        conn = self._conns.get(key)
        if conn is not None:
            return conn
        node = None
        if self.cluster:
            await self.side.initialize()  # learns the slots once
            if self._relearn:  # a slot may have moved (MOVED, failover)
                self._relearn = False
                await self.side.nodes_manager.initialize()
            node = self.side.get_node_from_key(stream)
            client = _node_client(node, self.block_s)
        else:
            client = async_from_url(
                self.url, decode_responses=True, single_connection_client=True
            )
        try:
            ident = int(await client.client_id())
        except BaseException:
            await client.aclose()
            raise
        conn = self._conns[key] = _Conn(client, ident, node)
        return conn

    async def _drop(self, key: int) -> None:
        conn = self._conns.pop(key, None)
        if conn is None:
            return
        try:
            await conn.client.aclose()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass

    async def close(self) -> None:
        """Close every connection (a later read opens new ones)."""
        for key in list(self._conns):
            await self._drop(key)


def _node_client(node: Any, block_s: float) -> Any:
    """A one-connection asyncio client straight to a cluster node, with the
    cluster's connection settings, whose reads outwait a `block_s` BLOCK."""
    kwargs = {
        k: v
        for k, v in node.connection_kwargs.items()
        if k not in ("event_dispatcher", "retry")
    }
    timeout = kwargs.get("socket_timeout")
    if timeout is not None and timeout <= block_s:
        kwargs["socket_timeout"] = block_s + BLOCKING_READ_MARGIN_S
    pool = aioredis.ConnectionPool(connection_class=node.connection_class, **kwargs)
    return aioredis.Redis(connection_pool=pool, single_connection_client=True)
