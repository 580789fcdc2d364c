"""The one driver of ops (see ops.py): sends what an op yields to Redis and
hands the replies back, on a sync or an asyncio redis-py client.

An op is a generator yielding `Cmd`, `Eval`, `Atomic` or a list of them (one
pipeline). A Redis error reply is thrown into the op at its `yield`, so the op
may answer it; one it does not answer reaches the caller, as
`RedisUnavailable` when Redis refuses for a while.

`gather` runs several ops side by side, one pipelined round trip per step,
which is how a page of 100 queues costs three round trips.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from redis.exceptions import ResponseError

from . import clusterdrive
from .cluster import is_cluster_client
from .exceptions import QueueError
from .hotpath import ADD_SCRIPTS
from .ops import Atomic, Cmd, Eval, EveryPrimary, Op, Request
from .outages import raise_if_unavailable
from .scripts import Scripts

T = TypeVar("T")


@lru_cache(maxsize=64)
def scripts_for(client: Any) -> Scripts:
    """The registered scripts of `client` (one set per client)."""
    return Scripts(client)


def _batch(request: list[Cmd | Eval] | Atomic) -> list[Cmd | Eval]:
    return request.requests if isinstance(request, Atomic) else request


def _cluster_sync(client: Any, scripts: Scripts, request: Request) -> Any:
    if isinstance(request, (Cmd, Eval)):
        one = request
        return clusterdrive.waiting_sync(lambda: send_one_sync(client, scripts, one))
    return clusterdrive.send_sync(client, scripts, request)


async def _cluster_async(client: Any, scripts: Scripts, request: Request) -> Any:
    if isinstance(request, (Cmd, Eval)):
        one = request
        return await clusterdrive.waiting_async(
            lambda: send_one_async(client, scripts, one)
        )
    return await clusterdrive.send_async(client, scripts, request)


def send_one_sync(client: Any, scripts: Scripts, request: Cmd | Eval) -> Any:
    """One command or script on a sync client; its reply."""
    if isinstance(request, Eval):
        return getattr(scripts, request.name)(request.keys, request.args)
    return client.execute_command(*request.args)


async def send_one_async(client: Any, scripts: Scripts, request: Cmd | Eval) -> Any:
    """One command or script on an asyncio client; its reply."""
    if isinstance(request, Eval):
        return await getattr(scripts, request.name)(request.keys, request.args)
    return await client.execute_command(*request.args)


def _primaries(client: Any) -> Any:
    """The `target_nodes` of every primary of a cluster client."""
    return client.PRIMARIES


def _per_node(reply: Any) -> list[Any]:
    """The replies of a command sent to every primary: redis-py answers a
    dict of node -> reply for several nodes, the bare reply for one."""
    return list(reply.values()) if isinstance(reply, dict) else [reply]


def send_sync(client: Any, scripts: Scripts, request: Request) -> Any:
    """One request on a sync client; its reply."""
    if isinstance(request, EveryPrimary):
        if is_cluster_client(client):
            return _per_node(
                client.execute_command(*request.args, target_nodes=_primaries(client))
            )
        return [client.execute_command(*request.args)]
    if is_cluster_client(client):
        return _cluster_sync(client, scripts, request)
    if isinstance(request, (list, Atomic)):
        pipe = client.pipeline(transaction=isinstance(request, Atomic))
        for r in _batch(request):
            if isinstance(r, Eval):
                getattr(scripts, r.name)(r.keys, r.args, client=pipe)
            else:
                pipe.execute_command(*r.args)
        return pipe.execute()
    return send_one_sync(client, scripts, request)


async def send_async(client: Any, scripts: Scripts, request: Request) -> Any:
    """One request on an asyncio client; its reply."""
    if isinstance(request, EveryPrimary):
        if is_cluster_client(client):
            return _per_node(
                await client.execute_command(
                    *request.args, target_nodes=_primaries(client)
                )
            )
        return [await client.execute_command(*request.args)]
    if is_cluster_client(client):
        return await _cluster_async(client, scripts, request)
    if isinstance(request, (list, Atomic)):
        pipe = client.pipeline(transaction=isinstance(request, Atomic))
        for r in _batch(request):
            if isinstance(r, Eval):
                await getattr(scripts, r.name)(r.keys, r.args, client=pipe)
            else:
                pipe.execute_command(*r.args)
        return await pipe.execute()
    return await send_one_async(client, scripts, request)


def run_sync(
    op: Op[T], client: Any, scripts: Scripts | None = None, adds: Any = None
) -> T:
    """Drive `op` to its end on a sync client; its result. `adds` (a queue's
    `hotpath.SyncAdds`) sends the add scripts on its own connection."""
    scripts = scripts if scripts is not None else scripts_for(client)
    try:
        request = next(op)
        while True:
            try:
                if (
                    adds is not None
                    and type(request) is Eval
                    and (request.name in ADD_SCRIPTS)
                ):
                    reply = adds.call(request)
                else:
                    reply = send_sync(client, scripts, request)
            except ResponseError as exc:
                request = op.throw(exc)
            else:
                request = op.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result
    except ResponseError as exc:
        raise_if_unavailable(exc)
        raise


async def run_async(
    op: Op[T],
    client: Any,
    scripts: Scripts | None = None,
    *,
    refusals_as_unavailable: bool = True,
    adds: Any = None,
    calls: Any = None,
) -> T:
    """Drive `op` to its end on an asyncio client; its result. A worker,
    which waits refusals out itself, passes `refusals_as_unavailable=False`
    to get Redis's own error rather than a RedisUnavailable. `adds` (a
    queue's `hotpath.AsyncCalls`) sends the add scripts, auto-pipelined;
    `calls` (a worker's hotpath.worker_calls) sends every script."""
    scripts = scripts if scripts is not None else scripts_for(client)
    try:
        request = next(op)
        while True:
            try:
                if calls is not None and type(request) is Eval:
                    reply = await calls.call(request)
                elif (
                    adds is not None
                    and type(request) is Eval
                    and (request.name in ADD_SCRIPTS)
                ):
                    reply = await adds.call(request)
                elif isinstance(request, Eval) and not is_cluster_client(client):
                    reply = await getattr(scripts, request.name)(
                        request.keys, request.args
                    )
                else:
                    reply = await send_async(client, scripts, request)
            except ResponseError as exc:
                request = op.throw(exc)
            else:
                request = op.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result
    except ResponseError as exc:
        if refusals_as_unavailable:
            raise_if_unavailable(exc)
        raise


# --- composing ops ------------------------------------------------------------
def cmd(*args: Any) -> Op:
    """One plain command as an op."""
    return (yield Cmd(args))


def cmds(commands: Iterable[tuple[Any, ...]]) -> Op:
    """Several plain commands as one op returning their replies."""
    return (yield [Cmd(c) for c in commands])


def guarded(op: Op) -> Op:
    """An op that returns a QueueError instead of raising it (for gather)."""
    try:
        return (yield from op)
    except QueueError as exc:
        return exc


def gather(gens: Sequence[Op]) -> Op:
    """Run ops side by side: each step sends every op's next request in one
    pipeline; returns their results in order. Transactions and `EveryPrimary`
    requests cannot be gathered."""
    results: list[Any] = [None] * len(gens)
    pending: dict[int, Any] = {}
    for i, gen in enumerate(gens):
        try:
            pending[i] = next(gen)
        except StopIteration as stop:
            results[i] = stop.value
    while pending:
        flat: list[Cmd | Eval] = []
        spans: list[tuple[int, int, int, bool]] = []
        for i, request in pending.items():
            if isinstance(request, (Atomic, EveryPrimary)):
                raise TypeError("gather cannot run transactions or EveryPrimary")
            many = isinstance(request, list)
            spans.append((i, len(flat), len(request) if many else 1, many))
            flat.extend(request if many else [request])
        replies = yield flat
        step: dict[int, Any] = {}
        for i, start, n, many in spans:
            reply = replies[start : start + n] if many else replies[start]
            try:
                step[i] = gens[i].send(reply)
            except StopIteration as stop:
                results[i] = stop.value
        pending = step
    return results
