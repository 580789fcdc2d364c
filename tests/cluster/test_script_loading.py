"""Scripts a cluster node has never run: pipelines and transactions behave on
first use as they do later. A command answered NOSCRIPT is sent again after
the others, so without loading first a flow's children met a parent not yet
added (-5, JobNotFound) and add_bulk handed out ids out of order (found by a
Bullpen flow run by Node workers, tests/cluster/test_interop.py)."""

from __future__ import annotations

import asyncio

from redis.cluster import RedisCluster

from queues import AsyncFlowProducer, FlowProducer, Queue


def _flush_scripts(r: RedisCluster, redis_url: str, qname: str) -> None:
    """No script on any node but add_standard_job on the node of `qname`'s
    slot (a plain job added to a twin queue)."""
    r.execute_command("SCRIPT FLUSH", target_nodes=RedisCluster.ALL_NODES)
    with Queue(qname + "w", redis_url) as warm:
        warm.add("warm", {})


def _flow(qname: str) -> dict[str, object]:
    return {
        "name": "root",
        "queue_name": qname + "a",
        "children": [
            {"name": "c1", "queue_name": qname + "b"},
            {"name": "c2", "queue_name": qname + "a"},
        ],
    }


def _check_flow(redis_url: str, qname: str, root_id: str, child_ids: list[str]) -> None:
    qa, qb = Queue(qname + "a", redis_url), Queue(qname + "b", redis_url)
    root = qa.get_job(root_id)
    assert root is not None and root.get_state() == "waiting-children"
    deps = root.get_dependencies()["unprocessed"]
    assert sorted(deps) == sorted(
        [f"bull:{qname}b:{child_ids[0]}", f"bull:{qname}a:{child_ids[1]}"]
    )
    assert qb.get_counts("waiting")["waiting"] == 1
    qa.close()
    qb.close()


def test_flow_on_nodes_without_its_scripts(
    redis_url: str, qname: str, r: RedisCluster
) -> None:
    """A sync FlowProducer's first flow, the parent's script not on the node
    (the children's is): the parent and its children are all added."""
    _flush_scripts(r, redis_url, qname)
    with FlowProducer(redis_url) as producer:
        tree = producer.add(_flow(qname))
    _check_flow(redis_url, qname, tree.job.id, [c.job.id for c in tree.children])


def test_async_flow_on_nodes_without_its_scripts(
    redis_url: str, qname: str, r: RedisCluster
) -> None:
    """The same with an AsyncFlowProducer."""
    _flush_scripts(r, redis_url, qname)

    async def add() -> object:
        async with AsyncFlowProducer(redis_url) as producer:
            return await producer.add(_flow(qname))

    tree = asyncio.run(add())
    _check_flow(
        redis_url,
        qname,
        tree.job.id,  # type: ignore[attr-defined]
        [c.job.id for c in tree.children],  # type: ignore[attr-defined]
    )


def test_add_bulk_ids_in_order_on_first_use(
    redis_url: str, qname: str, r: RedisCluster
) -> None:
    """add_bulk of standard and prioritized jobs, the prioritized script never
    run on the node: ids follow the order of the jobs, as BullMQ's addBulk."""
    _flush_scripts(r, redis_url, qname)
    queue = Queue(qname, redis_url)
    queue.add("first", {})
    jobs = queue.add_bulk(
        {"name": "j", "data": {}, "opts": {"priority": 1} if i % 2 else {}}
        for i in range(6)
    )
    assert [j.id for j in jobs] == ["2", "3", "4", "5", "6", "7"]
    queue.close()
