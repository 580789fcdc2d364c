"""Control pushes: how a scale change or a cancel reaches an idle worker
within a second without it polling Redis.

Writers (Fleet.set_desired, Fleet.request_cancel) make their change (the
desired-counts hash field, the cancel flag) and then announce it with a
small XADD: `bullpen:{control}:host:{host}` names the queue whose desired
counts changed, `bullpen:{control}:all` the queue and job to cancel, or the
GPUs whose model pins or warm pools changed (Fleet.pin_model, pools.py). Each
worker process and each supervisor holds one blocking XREAD on the streams
it cares about, on a connection of its own, so an idle one sends one
command per CONTROL_BLOCK_MS; on an entry it re-reads the state itself (the
entry only says where to look), and without one it re-reads every
CONTROL_SAFETY_S anyway, so a writer that did not announce (an older client,
a hand-edited hash) is still honoured.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from queues.cluster import is_cluster_client, node_client
from queues.connection import sibling_async_client, sibling_sync_client
from queues.names import qualified_name

from . import defaults
from .keys import BullpenKeys

log = logging.getLogger("gpu_workers.control")

#: Seconds a blocking read's socket waits past its BLOCK.
READ_MARGIN_S = 5.0
#: Pause after a failed read before the next one.
RETRY_S = 1.0
#: Entries one read returns at most (the rest come with the next read).
READ_COUNT = 100


def announce_desired(client: Any, keys: BullpenKeys, host: str, field: str) -> None:
    """Tell a host's supervisor and workers its desired counts of `field`
    (`prefix:queue`) changed (after writing them)."""
    client.xadd(
        keys.control_host(host),
        {"desired": field},
        maxlen=defaults.CONTROL_STREAM_MAXLEN,
        approximate=True,
    )


def announce_models(client: Any, keys: BullpenKeys, gpus: list[str]) -> None:
    """Tell workers the pins or warm pools of some GPUs changed."""
    client.xadd(
        keys.control_all(),
        {"models": ",".join(gpus)[:1000]},
        maxlen=defaults.CONTROL_STREAM_MAXLEN,
        approximate=True,
    )


def announce_cancel(
    client: Any, keys: BullpenKeys, prefix: str, queue: str, job_id: str
) -> None:
    """Tell every worker a job's cancel flag was set (after setting it)."""
    client.xadd(
        keys.control_all(),
        {"cancel": qualified_name(prefix, queue), "job": job_id},
        maxlen=defaults.CONTROL_STREAM_MAXLEN,
        approximate=True,
    )


@dataclass
class Pushes:
    """What the entries read since the last look said."""

    #: A desired-counts entry arrived (re-read the slot target / counts).
    desired: bool = False
    #: (prefix:queue, job id) of each cancel entry.
    cancels: set[tuple[str, str]] = field(default_factory=set)
    #: Pins or warm pools changed (re-read them).
    models: bool = False

    def __bool__(self) -> bool:
        return self.desired or bool(self.cancels) or self.models


def entries_of(reply: Any) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(stream, entry id, fields) of an XREAD reply, RESP2 (a list of
    [stream, entries]) or RESP3 (a dict); odd shapes yield nothing."""
    if not reply:
        return
    pairs = reply.items() if isinstance(reply, dict) else reply
    for item in pairs:
        try:
            stream, entries = item
        except (TypeError, ValueError):
            continue
        if isinstance(entries, list) and entries and isinstance(entries[0], list):
            entries = entries[0]  # RESP3 wraps a stream's entries once more
        for entry in entries or []:
            try:
                entry_id, fields = entry
            except (TypeError, ValueError):
                continue
            yield str(stream), str(entry_id), fields if isinstance(fields, dict) else {}


class ControlReader:
    """The blocking read of some control streams and what it found; one
    instance per process side (async for workers, sync for supervisors)."""

    def __init__(self, streams: list[str], block_ms: int) -> None:
        self.streams = streams
        self.block_ms = block_ms
        #: The id read up to, per stream (None: not looked up yet).
        self.ids: dict[str, str] | None = None
        self.found = Pushes()
        #: Reads sent, for tests and the bench.
        self.reads = 0

    def timeout_s(self) -> float:
        return self.block_ms / 1000 + READ_MARGIN_S

    def take(self) -> Pushes:
        """What was found since the last take (then forgotten)."""
        found, self.found = self.found, Pushes()
        return found

    def first_ids(self, replies: list[Any]) -> None:
        """The newest id of each stream (XREVRANGE + - COUNT 1 replies):
        entries after them are news; an empty stream reads from 0-0."""
        ids = {}
        for stream, reply in zip(self.streams, replies, strict=True):
            newest = next(iter(entries_of([(stream, reply)])), None)
            ids[stream] = newest[1] if newest else "0-0"
        self.ids = ids

    def note(self, reply: Any) -> bool:
        """Record an XREAD reply; True when it held entries."""
        assert self.ids is not None
        got = False
        for stream, entry_id, fields in entries_of(reply):
            if stream not in self.ids:
                continue
            got = True
            self.ids[stream] = entry_id
            if "desired" in fields:
                self.found.desired = True
            if "models" in fields:
                self.found.models = True
            queue, job = fields.get("cancel"), fields.get("job")
            if isinstance(queue, str) and isinstance(job, str):
                self.found.cancels.add((queue, job))
        return got


class AsyncControlWatch(ControlReader):
    """A worker's side: a task holding the blocking read on a client of its
    own; `pushed` is set whenever entries arrive. On a Redis Cluster that is
    a plain client on the primary serving the streams' slot (a cluster
    client would send COMMAND GETKEYS before each XREAD to route it), made
    again after an error (the slot may have moved)."""

    def __init__(
        self, client: Any, streams: list[str], block_ms: int = defaults.CONTROL_BLOCK_MS
    ) -> None:
        super().__init__(streams, block_ms)
        self._cluster: Any = client if is_cluster_client(client) else None
        self.client: Any = (
            None
            if self._cluster is not None
            else sibling_async_client(client, socket_timeout=self.timeout_s())
        )
        self.pushed = asyncio.Event()

    async def _connected(self) -> Any:
        if self.client is None:
            self.client = await node_client(
                self._cluster, self.streams[0], socket_timeout=self.timeout_s()
            )
        return self.client

    async def run(self, stop: asyncio.Event, failed: Any) -> None:
        """Read until `stop` is set; `failed(what, exc)` reports errors."""
        while not stop.is_set():
            try:
                client = await self._connected()
                if self.ids is None:
                    pipe = client.pipeline(transaction=False)
                    for stream in self.streams:
                        pipe.xrevrange(stream, "+", "-", count=1)
                    self.first_ids(await pipe.execute())
                assert self.ids is not None
                self.reads += 1
                reply = await client.xread(
                    dict(self.ids), count=READ_COUNT, block=self.block_ms
                )
                if self.note(reply):
                    self.pushed.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep watching after Redis blips
                failed("control stream", exc)
                if self._cluster is not None:  # find the slot's primary again
                    await self.close()
                    self.client = None
                try:
                    await asyncio.wait_for(stop.wait(), RETRY_S)
                except TimeoutError:
                    pass

    async def close(self) -> None:
        try:
            if self.client is not None:
                await self.client.aclose()
        except Exception:  # noqa: BLE001 - closing a broken client
            pass


class ControlThread(ControlReader):
    """A supervisor's side: a daemon thread holding the blocking read on a
    client of its own; `pushed` is set whenever entries arrive."""

    def __init__(
        self, client: Any, streams: list[str], block_ms: int = defaults.CONTROL_BLOCK_MS
    ) -> None:
        super().__init__(streams, block_ms)
        self.client = sibling_sync_client(client, socket_timeout=self.timeout_s())
        self.pushed = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name="bullpen-control", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop reading (the thread ends with its current read)."""
        self._stop.set()

    def take(self) -> Pushes:
        with self._lock:
            return super().take()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.ids is None:
                    pipe = self.client.pipeline(transaction=False)
                    for stream in self.streams:
                        pipe.xrevrange(stream, "+", "-", count=1)
                    self.first_ids(pipe.execute())
                assert self.ids is not None
                self.reads += 1
                reply = self.client.xread(
                    dict(self.ids), count=READ_COUNT, block=self.block_ms
                )
                with self._lock:
                    got = self.note(reply)
                if got:
                    self.pushed.set()
            except Exception as exc:  # noqa: BLE001 - keep watching after Redis blips
                if self._stop.is_set():
                    break
                log.warning("control stream: %r", exc)
                self._stop.wait(RETRY_S)
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - closing a broken client
            pass
