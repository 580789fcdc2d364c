"""The lean path of adds: the add scripts sent on one connection per redis-py
client, and, on asyncio, concurrent adds sent as one pipeline; and the same
path for a worker's claims and finishes, sent once (`worker_calls`).

redis-py's per-command path (pool checkout and release, the retry wrapper,
its observability hooks) costs a single add more client time than Bullpen's
own preparation of the job. An add script here goes out as EVALSHA on one
redis-py `Connection` (hiredis packing and parsing) taken from the client's
pool and kept, and NOSCRIPT loads the script and sends it again, as
`register_script` does. The connection belongs to the client, not to a
queue: the many short-lived `Queue` objects made on one shared client (the
dashboard's, gpu_workers') share it, and `client.close()` closes it with the
pool's others.

Whatever goes wrong with that connection (Redis restarted, a failover, a
timeout) is handed to redis-py's own path for the same calls: the dropped
connection is closed, and the calls are sent again through the client, with
its retry policy, exactly as redis-py itself would have resent them; a Redis
that stays down raises redis-py's ConnectionError. So the lean path changes
how fast an add goes, never what it does or how it fails.

`AsyncCalls` also auto-pipelines, as ioredis's `enableAutoPipelining` does:
an add made while the connection is on the wire waits; when it comes back,
every add that waited goes out on it, together, as one pipeline.
Each caller gets its own reply or its own error (a bad job fails alone); a
caller has one add in flight at a time, so its adds stay in its order.

On a Redis Cluster, `AsyncCalls` pipelines through redis-py's cluster
pipeline (queues.clusterdrive: a queue's keys share one slot), which also
keeps concurrent adds off redis-py's asyncio cluster connections: 200 adds
awaited at once on them raised AttributeError or stored jobs twice. The
sync `Queue` on a cluster adds through `queues.drive` as before.

A worker's claims and finishes take the same path on its sent-once client
(connection.sent_once_client), with one connection per finish call it keeps
in flight: at concurrency 1, redis-py's per-command path was about 28 us of
the worker's 188 us of CPU per job. There a broken connection is never
resent (a finish that may have run must not run twice): the call raises
redis-py's ConnectionError and the worker handles it as it did before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import clusterdrive
from .cluster import is_cluster_client
from .ops import Eval
from .scriptcalls import Routes, Steps, exchange
from .scripts import Scripts

#: The scripts that store one job: the only ones sent on the lean path.
ADD_SCRIPTS = frozenset(
    {"add_standard_job", "add_delayed_job", "add_prioritized_job", "add_grouped_job"}
)
#: What tells a broken connection: the calls then go through redis-py.
_BROKEN = (RedisConnectionError, RedisTimeoutError, OSError)


_made = threading.Lock()


def _of(client: Any, attribute: str, make: type) -> Any:
    """The object `make(client)` kept on the client itself: it lives and dies
    with the client (a registry keyed by clients would keep them alive, as
    the object refers back to its client)."""
    found = client.__dict__.get(attribute)
    if found is None:
        with _made:
            found = client.__dict__.setdefault(attribute, make(client))
    return found


def sync_adds(client: Any) -> SyncAdds | None:
    """The lean add path of a sync client (one per client); None on a
    cluster, whose adds go through queues.drive."""
    if is_cluster_client(client):
        return None
    found: SyncAdds = _of(client, "_bullpen_sync_adds", SyncAdds)
    return found


def async_adds(client: Any) -> AsyncCalls:
    """The auto-pipelined add path of an asyncio client (one per client)."""
    found: AsyncCalls = _of(client, "_bullpen_async_adds", AsyncCalls)
    return found


def worker_calls(scripts: Scripts, lanes: int) -> AsyncCalls | None:
    """The lean path of a worker's scripts on its sent-once client, `lanes`
    connections (one per call it keeps in flight); None on a cluster, whose
    calls go through queues.drive."""
    if is_cluster_client(scripts.client):
        return None
    return AsyncCalls(scripts.client, scripts, lanes=lanes, resend=False)


class SyncAdds:
    """A sync client's add scripts on a connection of their own.

    The connection serves one thread at a time: an add made while another
    thread's is in flight goes through redis-py's pool instead of waiting."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.scripts = Scripts(client)
        self.routes = Routes(self.scripts)
        self._conn: Any = None
        self._pid = 0
        self._lock = threading.Lock()

    def call(self, call: Eval) -> Any:
        """The reply of one add script (an error reply raises)."""
        script = getattr(self.scripts, call.name)
        if not self._lock.acquire(blocking=False):
            return script(call.keys, call.args)
        try:
            return self._send(script, call)
        finally:
            self._lock.release()

    def _connection(self) -> Any:
        if self._conn is None or self._pid != os.getpid():
            # After a fork the parent's connection is left alone: the pool
            # makes this process its own.
            self._conn = self.client.connection_pool.get_connection()
            self._pid = os.getpid()
        return self._conn

    def _send(self, script: Any, call: Eval) -> Any:
        try:
            [reply] = _drive_sync(self._connection(), exchange(self.routes, [call]))
        except _BROKEN:
            self._drop()
            return script(call.keys, call.args)
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.disconnect()
            self.client.connection_pool.release(conn)


class _Lane:
    """One connection of an `AsyncCalls` and the client's socket timeout."""

    conn: Any = None
    timeout: float | None = None


class AsyncCalls:
    """An asyncio client's scripts (its adds, or a worker's claims and
    finishes) on connections of their own (`lanes`), with the calls made
    while every lane is in flight sent, when one comes back, as one
    pipeline. `resend`: whether calls a broken connection dropped are sent
    again through redis-py (with its retry policy), or fail."""

    #: Connections. More would send the next batch while Redis runs the last;
    #: on bench/throughput.py's 2-core machine 1, 2 and 3 lanes all measured
    #: 22k adds/s (50 coroutines, median of 4), so one socket it is.
    LANES = 1

    def __init__(
        self,
        client: Any,
        scripts: Scripts | None = None,
        *,
        lanes: int | None = None,
        resend: bool = True,
    ) -> None:
        self.client = client
        self.scripts = scripts if scripts is not None else Scripts(client)
        self.routes = Routes(self.scripts)
        self._lanes = lanes or self.LANES
        self._resend = resend
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[_Lane] = []
        self._waiting: list[tuple[Eval, asyncio.Future[Any]]] = []
        self._flushers: set[asyncio.Task[None]] = set()
        self._cluster = is_cluster_client(client)

    async def call(self, call: Eval) -> Any:
        """The reply of one script call (an error reply raises)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A client used from a new event loop (asyncio.run again): what
            # belonged to the old one cannot be awaited here.
            self._loop, self._waiting = loop, []
            self._idle = [_Lane() for _ in range(self._lanes)]
            self._flushers = set()
        if not self._idle:
            future = loop.create_future()
            self._waiting.append((call, future))
            return await future
        lane = self._idle.pop()
        try:
            [reply] = await self._send(lane, [call])
        finally:
            self._next(lane)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def _next(self, lane: _Lane) -> None:
        """After a send: the adds that waited go out on `lane`, or it idles."""
        if self._waiting:
            task = asyncio.get_running_loop().create_task(self._flush(lane))
            self._flushers.add(task)
            task.add_done_callback(self._flushers.discard)
        else:
            self._idle.append(lane)

    async def _flush(self, lane: _Lane) -> None:
        try:
            while self._waiting:
                batch = [(c, f) for c, f in self._waiting if not f.done()]
                self._waiting = []
                if not batch:
                    continue
                try:
                    replies = await self._send(lane, [c for c, _ in batch])
                except BaseException as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(_as_error(exc))
                    if not isinstance(exc, Exception):
                        raise
                    continue  # each caller has its error; the next batch goes on
                for (_, future), reply in zip(batch, replies):
                    if future.done():
                        continue
                    if isinstance(reply, BaseException):
                        future.set_exception(reply)
                    else:
                        future.set_result(reply)
        except asyncio.CancelledError:
            for _, future in self._waiting:  # the loop is stopping
                future.cancel()
            self._waiting = []
            raise
        finally:
            if not self._waiting:
                self._idle.append(lane)
            else:  # an unexpected error ended this flusher: another takes over
                self._next(lane)

    async def _send(self, lane: _Lane, calls: list[Eval]) -> list[Any]:
        """Each call's reply, or its error as a value."""
        if self._cluster:
            return await clusterdrive.replies_async(self.client, self.scripts, calls)
        try:
            conn = lane.conn or await self._connect(lane)
            if lane.timeout is None:
                return await _drive(conn, exchange(self.routes, calls))
            # The client's socket timeout bounds the whole exchange, once:
            # redis-py's per-read timeout (and the task its timed write
            # makes) cost a single add 10-25 us of CPU.
            async with asyncio.timeout(lane.timeout):
                return await _drive(conn, exchange(self.routes, calls))
        except _BROKEN:  # TimeoutError (asyncio.timeout's) is an OSError
            await self._drop(lane)
            if not self._resend:
                raise
            return await self._through_redis_py(calls)
        except BaseException:
            # Cancelled between a send and its replies: the connection's
            # next reply would belong to someone else.
            await self._drop(lane)
            raise

    async def _through_redis_py(self, calls: list[Eval]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for call in calls:
            await getattr(self.scripts, call.name)(call.keys, call.args, client=pipe)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def _connect(self, lane: _Lane) -> Any:
        conn = await self.client.connection_pool.get_connection()
        lane.timeout = conn.socket_timeout
        conn.socket_timeout = None  # while it is ours: see _send
        lane.conn = conn
        return conn

    async def _drop(self, lane: _Lane) -> None:
        conn, lane.conn = lane.conn, None
        if conn is not None:
            await conn.disconnect(nowait=True)
            conn.socket_timeout = lane.timeout
            await self.client.connection_pool.release(conn)

    async def drain(self) -> None:
        """Wait until the adds waiting for a pipeline have their replies."""
        if self._loop is not asyncio.get_running_loop():
            return
        while pending := [t for t in self._flushers if not t.done()]:
            with contextlib.suppress(Exception):
                await asyncio.shield(pending[0])


def _drive_sync(conn: Any, steps: Steps) -> list[Any]:
    """Run `steps` (scriptcalls.exchange) on a sync connection."""
    try:
        commands = next(steps)
        while True:
            conn.send_packed_command(conn.pack_commands(commands))
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except ResponseError as exc:
                    replies.append(exc)
            commands = steps.send(replies)
    except StopIteration as stop:
        result: list[Any] = stop.value
        return result


async def _drive(conn: Any, steps: Steps) -> list[Any]:
    """Run `steps` (scriptcalls.exchange) on an asyncio connection."""
    try:
        commands = next(steps)
        while True:
            commands = steps.send(await _pipelined(conn, commands))
    except StopIteration as stop:
        result: list[Any] = stop.value
        return result


async def _pipelined(conn: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """Send commands in one write; their replies, error replies as values."""
    await conn.send_packed_command(conn.pack_commands(commands))
    replies: list[Any] = []
    for _ in commands:
        try:
            replies.append(await conn.read_response())
        except ResponseError as exc:
            replies.append(exc)
    return replies


def _as_error(exc: BaseException) -> BaseException:
    """What a waiting add raises when its batch could not be sent."""
    if isinstance(exc, asyncio.CancelledError):
        return RedisConnectionError(
            "the pipeline carrying this add was cancelled before its reply came "
            "(the job may have been stored)"
        )
    return exc
