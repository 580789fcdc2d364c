"""Flows (docs/protocol.md §4.4, 4.7 step 9): a parent job that waits in
`waiting-children` until its children, possibly in other queues, finish.

`FlowProducer` and `AsyncFlowProducer` add a whole tree in one MULTI
transaction, as Node's FlowProducer does: each parent through
`add_parent_job`, each leaf through the ordinary add scripts with
`parentKey` and `parent` = {id, queueKey, fpof?|cpof?|idof?|rdof?}, then a
`release_parent` per parent for children that already existed and were
done. Nodes without a `job_id` get a UUID, as in BullMQ 6.

A node is a dict: {name, queue_name, data?, opts? (the keyword options of
`Queue.add`), prefix?, children?}; `queueName` is accepted too. As in
BullMQ (`queuesOptions[name].defaultJobOptions`), `add` may take default
job options per queue name, under each node's own opts.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import codec, defaults, ops
from .cluster import FlowAcrossSlots, is_cluster_client, slot_of
from .connection import ConnectionLike, async_client, sync_client
from .exceptions import InvalidJobOptions, raise_for_code
from .job import Job
from .keys import QueueKeys
from .names import check_queue_name
from .options import (
    build_opts,
    check_default_job_options,
    decode_opts,
    merge_job_options,
)
from .queue import AsyncQueue, Queue, _QueueBase

#: The flags a child's `parent` JSON carries (short opts keys, docs/protocol.md §2).
PARENT_FLAGS = ("fpof", "cpof", "idof", "rdof")

QueueFor = Callable[[str, str], _QueueBase[Any]]
#: Default job options per queue name.
QueueDefaults = Mapping[str, Mapping[str, Any]]


@dataclass
class JobNode:
    """A job of a flow with its children (as added, or as read back)."""

    job: Job
    children: list[JobNode] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready tree: the job's fields and its children's."""
        out = self.job.to_dict()
        out["queueName"] = self.job.queue.name
        out["children"] = [c.to_dict() for c in self.children]
        return out


# --- adding -----------------------------------------------------------------
@dataclass
class _Entry:
    call: ops.Eval
    node: JobNode


def _plan(
    node: Mapping[str, Any],
    queue_for: QueueFor,
    default_prefix: str,
    now: int,
    entries: list[_Entry],
    releases: list[ops.Eval],
    parent: tuple[QueueKeys, str] | None,
    queue_defaults: QueueDefaults,
) -> JobNode:
    """Append the add call of `node` then of its descendants (parents first)."""
    name = node.get("name")
    if not isinstance(name, str):
        raise InvalidJobOptions("every flow node needs a string 'name'")
    queue_name = check_queue_name(node.get("queue_name") or node.get("queueName") or "")
    prefix = node.get("prefix") or default_prefix
    queue = queue_for(queue_name, prefix)
    children = list(node.get("children") or [])
    options = merge_job_options(
        queue_defaults.get(queue_name) or {}, node.get("opts") or {}
    )
    if options.get("deduplication") and (children or parent):
        raise InvalidJobOptions(
            "deduplication cannot be used on flow nodes with children or a parent"
        )
    opts = build_opts(**options)
    # A custom id stays in opts (as Node keeps it); a generated one does not.
    job_id = opts.get("jobId") or str(uuid.uuid4())
    extra: dict[str, Any] = {"id": job_id, "flow": True}
    parent_json: dict[str, Any] | None = None
    if parent is not None:
        parent_keys, parent_id = parent
        opts["parent"] = {"id": parent_id, "queue": parent_keys.qualified_name}
        parent_json = {"id": parent_id, "queueKey": parent_keys.qualified_name}
        parent_json.update({flag: True for flag in PARENT_FLAGS if opts.get(flag)})
        extra["parentKey"] = parent_keys.job(parent_id)
        extra["parent"] = codec.dumps(parent_json)
    data = node.get("data")
    call = ops.add_call(
        queue.keys,
        name,
        codec.dumps({} if data is None else data),
        opts,
        int(opts.get("timestamp") or now),
        extra,
        waiting_children=bool(children),
    )
    job = Job(
        queue,
        job_id,
        name=name,
        data=data,
        opts=decode_opts(opts),
        timestamp=int(opts.get("timestamp") or now),
        delay=opts.get("delay", 0),
        priority=opts.get("priority", 0),
        parent=parent_json,
        parent_key=extra.get("parentKey"),
    )
    tree = JobNode(job)
    entries.append(_Entry(call, tree))
    if children:
        keys = queue.keys
        for child in children:
            tree.children.append(
                _plan(
                    child,
                    queue_for,
                    default_prefix,
                    now,
                    entries,
                    releases,
                    (keys, job_id),
                    queue_defaults,
                )
            )
        releases.append(
            ops.Eval(
                "release_parent",
                (keys.job(job_id),),
                (keys.qualified_name, job_id, now),
            )
        )
    return tree


def _check_one_slot(entries: list[_Entry]) -> None:
    """On a cluster a transaction runs on one slot: refuse, before anything is
    written, flows whose queues hash to different slots."""
    slots: dict[int, str] = {}
    for entry in entries:
        keys = entry.node.job.queue.keys
        slots.setdefault(slot_of(keys.base), keys.qualified_name)
    if len(slots) > 1:
        named = ", ".join(f"{q!r} in slot {s}" for s, q in sorted(slots.items()))
        raise FlowAcrossSlots(
            f"a flow's jobs must share one Redis Cluster slot, but its queues are "
            f"{named}: give them one hash tag (e.g. prefix '{{bull}}' for every "
            f"queue of the flow); nothing was added"
        )


def add_flows(
    flows: Sequence[Mapping[str, Any]],
    queue_for: QueueFor,
    prefix: str,
    now: int,
    queue_defaults: QueueDefaults | None = None,
    one_slot: bool = False,
) -> ops.Op:
    """Add flow trees in one transaction; returns their JobNodes. With
    `one_slot` (a cluster), every job must hash to one slot."""
    entries: list[_Entry] = []
    releases: list[ops.Eval] = []
    checked = {
        name: check_default_job_options(given)
        for name, given in (queue_defaults or {}).items()
    }
    trees = [
        _plan(f, queue_for, prefix, now, entries, releases, None, checked)
        for f in flows
    ]
    if not entries:
        return trees
    if one_slot:
        _check_one_slot(entries)
    requests: list[ops.Cmd | ops.Eval] = [e.call for e in entries]
    requests.extend(releases)
    replies = yield ops.Atomic(requests)
    for entry, reply in zip(entries, replies[: len(entries)], strict=True):
        raise_for_code(reply, entry.node.job.id)
        entry.node.job.id = str(reply)
    return trees


# --- reading ----------------------------------------------------------------
def split_job_key(key: str, prefix: str) -> tuple[str, str, str]:
    """(prefix, queue, id) of a full job key; queue names hold no ':'."""
    if key.startswith(prefix + ":"):
        queue_name, _, job_id = key[len(prefix) + 1 :].partition(":")
        return prefix, queue_name, job_id
    head, queue_name, job_id = key.rsplit(":", 2)
    return head, queue_name, job_id


def get_flow(
    queue_for: QueueFor,
    queue_name: str,
    job_id: str,
    prefix: str,
    depth: int,
    max_children: int,
) -> ops.Op:
    """The tree under a job, `depth` levels deep, at most `max_children` of each
    outcome per parent (for dashboards)."""
    queue = queue_for(queue_name, prefix)
    # Type-safe: a child key another client wrote may name a list or a set.
    [read] = yield from ops.get_job_hashes(queue.keys, [job_id])
    if not read.fields:
        return None
    node = JobNode(Job.from_hash(queue, job_id, read.fields))
    if depth <= 1:
        return node
    deps = yield from ops.dependencies(queue.keys, job_id)
    keys: list[str] = []
    for group in (
        list(deps["processed"]),
        deps["unprocessed"],
        deps["failed"],
        list(deps["ignored"]),
    ):
        keys.extend(group[:max_children])
    for key in keys:
        try:
            child_prefix, child_queue, child_id = split_job_key(key, prefix)
            check_queue_name(child_queue)
        except ValueError:  # not a job key (another client wrote it)
            continue
        child = yield from get_flow(
            queue_for, child_queue, child_id, child_prefix, depth - 1, max_children
        )
        if child is not None:
            node.children.append(child)
    return node


# --- producers --------------------------------------------------------------
class _FlowProducerBase:
    """The API shared by `FlowProducer` and `AsyncFlowProducer`."""

    client: Any

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._queues: dict[tuple[str, str], _QueueBase[Any]] = {}

    def _make_queue(self, name: str, prefix: str) -> _QueueBase[Any]:
        raise NotImplementedError

    def _queue(self, name: str, prefix: str) -> _QueueBase[Any]:
        queue = self._queues.get((prefix, name))
        if queue is None:
            queue = self._queues[(prefix, name)] = self._make_queue(name, prefix)
        return queue

    def _driver(self, flows: Sequence[Mapping[str, Any]]) -> _QueueBase[Any]:
        first = flows[0] if flows else {}
        name = first.get("queue_name") or first.get("queueName") or "flow"
        return self._queue(str(name), first.get("prefix") or self.prefix)

    def add(
        self, flow: Mapping[str, Any], default_job_options: QueueDefaults | None = None
    ) -> Any:
        """Add one flow tree atomically; returns its root JobNode.
        `default_job_options`: {queue name: options its nodes start from}."""

        def op() -> ops.Op:
            trees = yield from add_flows(
                [flow],
                self._queue,
                self.prefix,
                ops.now_ms(),
                default_job_options,
                is_cluster_client(self.client),
            )
            return trees[0]

        return self._driver([flow]).drive(op())

    def add_bulk(
        self,
        flows: Iterable[Mapping[str, Any]],
        default_job_options: QueueDefaults | None = None,
    ) -> Any:
        """Add several flow trees in one transaction; returns their JobNodes."""
        flows = list(flows)
        return self._driver(flows).drive(
            add_flows(
                flows,
                self._queue,
                self.prefix,
                ops.now_ms(),
                default_job_options,
                is_cluster_client(self.client),
            )
        )

    def get_flow(
        self,
        queue_name: str,
        job_id: str,
        depth: int = 10,
        max_children: int = 20,
        prefix: str | None = None,
    ) -> Any:
        """The JobNode tree under a job (None when it does not exist)."""
        prefix = prefix or self.prefix
        return self._queue(queue_name, prefix).drive(
            get_flow(self._queue, queue_name, job_id, prefix, depth, max_children)
        )


class FlowProducer(_FlowProducerBase):
    """Adds and reads flows on a sync redis-py client."""

    def __init__(
        self, connection: ConnectionLike = None, prefix: str = defaults.PREFIX
    ) -> None:
        super().__init__(prefix)
        self.client = sync_client(connection)

    def _make_queue(self, name: str, prefix: str) -> _QueueBase[Any]:
        return Queue(name, self.client, prefix)

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()

    def __enter__(self) -> FlowProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncFlowProducer(_FlowProducerBase):
    """Adds and reads flows on an asyncio redis-py client; await its methods."""

    def __init__(
        self, connection: ConnectionLike = None, prefix: str = defaults.PREFIX
    ) -> None:
        super().__init__(prefix)
        self.client = async_client(connection)

    def _make_queue(self, name: str, prefix: str) -> _QueueBase[Any]:
        return AsyncQueue(name, self.client, prefix)

    async def close(self) -> None:
        """Close the client's connections."""
        await self.client.aclose()

    async def __aenter__(self) -> AsyncFlowProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["AsyncFlowProducer", "FlowProducer", "JobNode"]
