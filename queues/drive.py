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

from redis.exceptions import NoScriptError, ResponseError

from .cluster import is_cluster_client
from .exceptions import QueueError
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


def _queue_on(pipe: Any, scripts: Scripts, r: Cmd | Eval) -> None:
    """Queue one command on a cluster pipeline: a script as a plain EVALSHA,
    which redis-py's cluster pipeline routes by its first key (it refuses
    its own Script objects there)."""
    if isinstance(r, Eval):
        sha = getattr(scripts, r.name).sha
        pipe.execute_command("EVALSHA", sha, len(r.keys), *r.keys, *r.args)
    else:
        pipe.execute_command(*r.args)


def _missing_scripts(batch: list[Cmd | Eval], replies: list[Any]) -> list[int]:
    return [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]


def _first_error(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply
    return replies


def _transaction_scripts(scripts: Scripts, request: Any) -> list[Any]:
    """The scripts a transaction calls (none for a plain pipeline)."""
    if not isinstance(request, Atomic):
        return []
    names = sorted({r.name for r in request.requests if isinstance(r, Eval)})
    return [getattr(scripts, name) for name in names]


def _cluster_sync(client: Any, scripts: Scripts, request: Any) -> Any:
    """A pipeline on a cluster client (split by node by redis-py). A node
    that lacks a script (new, failed over) answers NOSCRIPT without running
    it: the script is loaded on every primary and those commands alone are
    sent again. A transaction's scripts are loaded before it instead, as
    redis-py's own pipeline does: within MULTI the commands after a NOSCRIPT
    still run, without what it should have written (a flow's child before
    its parent)."""
    needed = _transaction_scripts(scripts, request)
    if needed:
        present = client.script_exists(*[s.sha for s in needed])
        for script, ok in zip(needed, present):
            if not ok:
                client.script_load(script.script)
    batch = _batch(request)
    pipe = client.pipeline(transaction=isinstance(request, Atomic))
    for r in batch:
        _queue_on(pipe, scripts, r)
    replies = pipe.execute(raise_on_error=False)
    missing = _missing_scripts(batch, replies)
    if missing:
        again = client.pipeline(transaction=False)
        for name in {batch[i].name for i in missing}:  # type: ignore[union-attr]
            client.script_load(getattr(scripts, name).script)
        for i in missing:
            _queue_on(again, scripts, batch[i])
        for i, reply in zip(missing, again.execute(raise_on_error=False)):
            replies[i] = reply
    return _first_error(replies)


async def _cluster_async(client: Any, scripts: Scripts, request: Any) -> Any:
    """`_cluster_sync` on an asyncio cluster client."""
    needed = _transaction_scripts(scripts, request)
    if needed:
        present = await client.script_exists(*[s.sha for s in needed])
        for script, ok in zip(needed, present):
            if not ok:
                await client.script_load(script.script)
    batch = _batch(request)
    pipe = client.pipeline(transaction=isinstance(request, Atomic))
    for r in batch:
        _queue_on(pipe, scripts, r)
    replies = await pipe.execute(raise_on_error=False)
    missing = _missing_scripts(batch, replies)
    if missing:
        again = client.pipeline(transaction=False)
        for name in {batch[i].name for i in missing}:  # type: ignore[union-attr]
            await client.script_load(getattr(scripts, name).script)
        for i in missing:
            _queue_on(again, scripts, batch[i])
        for i, reply in zip(missing, await again.execute(raise_on_error=False)):
            replies[i] = reply
    return _first_error(replies)


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
    if isinstance(request, (list, Atomic)) and is_cluster_client(client):
        return _cluster_sync(client, scripts, request)
    if isinstance(request, (list, Atomic)):
        pipe = client.pipeline(transaction=isinstance(request, Atomic))
        for r in _batch(request):
            if isinstance(r, Eval):
                getattr(scripts, r.name)(r.keys, r.args, client=pipe)
            else:
                pipe.execute_command(*r.args)
        return pipe.execute()
    if isinstance(request, Eval):
        return getattr(scripts, request.name)(request.keys, request.args)
    return client.execute_command(*request.args)


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
    if isinstance(request, (list, Atomic)) and is_cluster_client(client):
        return await _cluster_async(client, scripts, request)
    if isinstance(request, (list, Atomic)):
        pipe = client.pipeline(transaction=isinstance(request, Atomic))
        for r in _batch(request):
            if isinstance(r, Eval):
                await getattr(scripts, r.name)(r.keys, r.args, client=pipe)
            else:
                pipe.execute_command(*r.args)
        return await pipe.execute()
    if isinstance(request, Eval):
        return await getattr(scripts, request.name)(request.keys, request.args)
    return await client.execute_command(*request.args)


def run_sync(op: Op[T], client: Any, scripts: Scripts | None = None) -> T:
    """Drive `op` to its end on a sync client; its result."""
    scripts = scripts if scripts is not None else scripts_for(client)
    try:
        request = next(op)
        while True:
            try:
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
) -> T:
    """Drive `op` to its end on an asyncio client; its result. A worker,
    which waits refusals out itself, passes `refusals_as_unavailable=False`
    to get Redis's own error rather than a RedisUnavailable."""
    scripts = scripts if scripts is not None else scripts_for(client)
    try:
        request = next(op)
        while True:
            try:
                if isinstance(request, Eval):  # the worker's hot path: one await
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
