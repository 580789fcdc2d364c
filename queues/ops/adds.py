"""Adding jobs: the script call that stores one (docs/protocol.md §4.1-4.4),
and `send_adds`, which runs such calls, durably when asked."""

from __future__ import annotations

from typing import Any

from .. import codec
from ..durability import Durability
from ..exceptions import InvalidJobOptions, NotDurable
from ..keys import QueueKeys
from .requests import Cmd, Eval, Op


def add_call(
    keys: QueueKeys,
    name: str,
    data_json: str,
    opts: dict[str, Any],
    timestamp: int,
    extra: dict[str, Any] | None = None,
    waiting_children: bool = False,
) -> Eval:
    """The script call that stores one job (docs/protocol.md §4.1-4.4).

    `extra` adds script arguments: `id` (a flow node's id), `parentKey`,
    `parent` (JSON text) and `flow`; `waiting_children` adds a flow parent.
    A job with a group goes to its group (docs/groups.md), never to `wait`.
    """
    args: dict[str, Any] = {
        "name": name,
        "opts": codec.dumps(opts),
        "timestamp": str(timestamp),
        "delay": str(opts.get("delay", 0)),
        "priority": str(opts.get("priority", 0)),
    }
    if "jobId" in opts:
        args["id"] = opts["jobId"]
    if opts.get("lifo"):
        args["lifo"] = True
    de = opts.get("de")
    if de:
        args["de"] = de
        args["deid"] = de["id"]
    if extra:
        args.update(extra)
    group = opts.get("group")
    if group:
        if waiting_children:
            raise InvalidJobOptions("a flow parent cannot have a group")
        args["gid"] = group["id"]
        return Eval(
            "add_grouped_job",
            (keys.meta, keys.id, keys.events, keys.marker, keys.base + "groups:meta"),
            (keys.base, codec.dumps(args), data_json),
        )
    packed = (keys.base, codec.dumps(args), data_json)
    if waiting_children:
        return Eval(
            "add_parent_job",
            (keys.meta, keys.id, keys.events, keys.waiting_children),
            packed,
        )
    if opts.get("delay", 0) > 0:
        return Eval(
            "add_delayed_job",
            (keys.delayed, keys.meta, keys.id, keys.events, keys.marker),
            packed,
        )
    if opts.get("priority"):
        return Eval(
            "add_prioritized_job",
            (
                keys.prioritized,
                keys.meta,
                keys.id,
                keys.events,
                keys.marker,
                keys.active,
                keys.pc,
            ),
            packed,
        )
    return Eval(
        "add_standard_job",
        (keys.wait, keys.meta, keys.id, keys.events, keys.marker, keys.active),
        packed,
    )


def send_adds(calls: list[Eval], durability: Durability | None = None) -> Op[list[str]]:
    """Run add calls (several as one pipeline); the ids they return.

    With `durability`, `WAIT replicas timeout` follows them in the same
    pipeline: WAIT counts the replicas that have every write of its own
    connection, so it must go on the connection that ran the adds. Fewer
    than asked raises `NotDurable` naming the jobs, which are stored on the
    primary all the same.
    """
    if not calls:
        return []
    batch: list[Cmd | Eval] = list(calls)
    if durability is None:
        if len(calls) == 1:
            return [(yield calls[0])]
        ids: list[str] = yield batch
        return ids
    batch.append(Cmd(("WAIT", durability.replicas, durability.timeout_ms)))
    *ids, acked = yield batch
    if acked < durability.replicas:
        raise NotDurable(ids, acked, durability.replicas, durability.timeout_ms)
    return ids
