"""Sending ops' requests to a Redis Cluster (see drive.py): pipelines split
by node, scripts as EVALSHA (EVAL in a transaction), and commands that a
migrating slot kept from running sent again.

While a slot moves between primaries, Redis answers ASK or, for a script
whose keys are split between the two nodes, TRYAGAIN; after it moved,
MOVED. redis-py follows ASK and MOVED and retries TRYAGAIN a few times,
then gives up with ClusterError ("TTL exhausted"). Every one of these means
the command did not run, so it is safe to send again: it is, for up to
`SLOT_MOVE_WAIT_S`, alone (a pipeline's other commands did run and are not
sent twice), so during a migration a pipeline's commands may run out of
order (add_bulk's ids). Scripts are loaded on every primary before their
first use in a pipeline for the same reason: NOSCRIPT would reorder it.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.exceptions import (
    AskError,
    ClusterError,
    MovedError,
    NoScriptError,
    ResponseError,
    TryAgainError,
)

from .cluster import node_client
from .ops import Atomic, Cmd, Eval
from .scripts import Scripts

T = TypeVar("T")
#: How long a command a moving slot kept from running is sent again.
SLOT_MOVE_WAIT_S = 15.0
#: Pause between two tries.
SLOT_MOVE_PAUSE_S = 0.05
#: Replies that say the command did not run because its slot is moving.
NOT_RUN = (TryAgainError, ClusterError, AskError, MovedError)


#: Scripts a `Scripts` has loaded on every primary of its cluster.
_LOADED: weakref.WeakKeyDictionary[Scripts, set[str]] = weakref.WeakKeyDictionary()


def _to_load(scripts: Scripts, batch: list[Cmd | Eval]) -> list[str]:
    """The scripts of `batch` not yet loaded on every primary through
    `scripts`, to load before sending it: a command answered NOSCRIPT is
    sent again after the others, so a script's first use on a node would
    reorder a pipeline (add_bulk's ids, a flow's parent after its children)."""
    loaded = _LOADED.setdefault(scripts, set())
    names = dict.fromkeys(r.name for r in batch if isinstance(r, Eval))
    return [n for n in names if n not in loaded]


def _batch(request: Any) -> list[Cmd | Eval]:
    return request.requests if isinstance(request, Atomic) else list(request)


def _queue_on(pipe: Any, scripts: Scripts, r: Cmd | Eval, whole: bool) -> None:
    """Queue one command on a pipeline: a script as a plain EVALSHA (EVAL with
    its text when `whole`), which redis-py's cluster pipeline routes by its
    first key (it refuses its own Script objects there)."""
    if isinstance(r, Eval):
        script = getattr(scripts, r.name)
        command, body = ("EVAL", script.script) if whole else ("EVALSHA", script.sha)
        pipe.execute_command(command, body, len(r.keys), *r.keys, *r.args)
    else:
        pipe.execute_command(*r.args)


def _to_resend(
    batch: list[Any], replies: list[Any], sent: list[int]
) -> tuple[list[int], set[str], bool]:
    """Of the commands just `sent`: those that did not run, the scripts some
    of them lacked, and whether a moving slot kept any from running."""
    again = [i for i in sent if isinstance(replies[i], (NoScriptError, *NOT_RUN))]
    unloaded = {batch[i].name for i in again if isinstance(replies[i], NoScriptError)}
    moving = any(not isinstance(replies[i], NoScriptError) for i in again)
    return again, unloaded, moving


def _first_error(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, (ResponseError, ClusterError)):
            raise reply
    return replies


def send_sync(client: Any, scripts: Scripts, request: Any) -> Any:
    """A pipeline (or transaction) on a sync cluster client; its replies."""
    batch = _batch(request)
    atomic = isinstance(request, Atomic)
    if not atomic:
        for name in _to_load(scripts, batch):
            client.script_load(getattr(scripts, name).script)
            _LOADED[scripts].add(name)
    todo = list(range(len(batch)))
    replies: list[Any] = [None] * len(batch)
    deadline = time.monotonic() + SLOT_MOVE_WAIT_S
    while True:
        pipe = client.pipeline(transaction=atomic)
        for i in todo:
            _queue_on(pipe, scripts, batch[i], atomic)
        for i, reply in zip(todo, pipe.execute(raise_on_error=False)):
            replies[i] = reply
        todo, unloaded, moving = _to_resend(batch, replies, todo)
        if not todo or time.monotonic() > deadline or atomic:
            return _first_error(replies)
        for name in unloaded:
            client.script_load(getattr(scripts, name).script)
        if moving:
            time.sleep(SLOT_MOVE_PAUSE_S)


async def send_async(client: Any, scripts: Scripts, request: Any) -> Any:
    """`send_sync` on an asyncio cluster client."""
    batch = _batch(request)
    if isinstance(request, Atomic):
        return await waiting_async(lambda: _atomic_on_node(client, scripts, batch))
    return _first_error(await replies_async(client, scripts, batch))


async def replies_async(client: Any, scripts: Scripts, batch: list[Any]) -> list[Any]:
    """A pipeline on an asyncio cluster client: each command's reply, an
    error reply as a value (the auto-pipelined adds of queues.hotpath)."""
    for name in _to_load(scripts, batch):
        await client.script_load(getattr(scripts, name).script)
        _LOADED[scripts].add(name)
    todo = list(range(len(batch)))
    replies: list[Any] = [None] * len(batch)
    deadline = time.monotonic() + SLOT_MOVE_WAIT_S
    while True:
        pipe = client.pipeline(transaction=False)
        for i in todo:
            _queue_on(pipe, scripts, batch[i], False)
        for i, reply in zip(todo, await pipe.execute(raise_on_error=False)):
            replies[i] = reply
        todo, unloaded, moving = _to_resend(batch, replies, todo)
        if not todo or time.monotonic() > deadline:
            return replies
        for name in unloaded:
            await client.script_load(getattr(scripts, name).script)
        if moving:
            await asyncio.sleep(SLOT_MOVE_PAUSE_S)


def _first_key(r: Cmd | Eval) -> str:
    return str(r.keys[0] if isinstance(r, Eval) else r.args[1])


async def _atomic_on_node(client: Any, scripts: Scripts, batch: list[Any]) -> Any:
    """A transaction on the primary of its slot, through a plain connection
    (see `node_client`). A slot that moved fails the whole MULTI before it
    runs (EXECABORT, nothing applied): the slot map is refreshed and the
    caller sends it again."""
    node = await node_client(client, _first_key(batch[0]))
    try:
        pipe = node.pipeline(transaction=True)
        for r in batch:
            _queue_on(pipe, scripts, r, True)
        return await pipe.execute()
    except ResponseError as exc:
        if "EXECABORT" in str(exc) or isinstance(exc, NOT_RUN):
            await client.nodes_manager.initialize()
            raise TryAgainError(str(exc)) from exc
        raise
    finally:
        await node.aclose()


def waiting_sync(send: Callable[[], T]) -> T:
    """`send()`, sent again while a moving slot keeps it from running."""
    deadline = time.monotonic() + SLOT_MOVE_WAIT_S
    while True:
        try:
            return send()
        except NOT_RUN:
            if time.monotonic() > deadline:
                raise
            time.sleep(SLOT_MOVE_PAUSE_S)


async def waiting_async(send: Callable[[], Awaitable[T]]) -> T:
    """`waiting_sync` for an awaitable."""
    deadline = time.monotonic() + SLOT_MOVE_WAIT_S
    while True:
        try:
            return await send()
        except NOT_RUN:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(SLOT_MOVE_PAUSE_S)
