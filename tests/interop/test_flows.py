"""Interop point 6: flows made in one language, run in the other. Parents
complete with their children's values; failure flags act the same."""

from __future__ import annotations

from typing import Any

from queues import FlowProducer, Queue
from tests.helpers import wait_until

from .helpers import node, node_worker, python_worker


def _tree(a: str, b: str, camel: bool) -> list[dict[str, Any]]:
    """Three flows over queues a and b: a nested tree, an fpof child that fails,
    an idof child that fails. `camel` gives Node's field and option names."""
    qkey = "queueName" if camel else "queue_name"
    fpof = "failParentOnFailure" if camel else "fail_parent_on_failure"
    idof = "ignoreDependencyOnFailure" if camel else "ignore_dependency_on_failure"
    return [
        {
            "name": "root",
            qkey: a,
            "data": {"parent": True},
            "children": [
                {"name": "c1", qkey: a, "data": {"n": 1}},
                {"name": "c2", qkey: b, "data": {"n": 2}},
                {
                    "name": "mid",
                    qkey: b,
                    "data": {"parent": True},
                    "children": [{"name": "c4", qkey: a, "data": {"n": 4}}],
                },
            ],
        },
        {
            "name": "doomed",
            qkey: a,
            "data": {"parent": True},
            "children": [
                {
                    "name": "bad",
                    qkey: b,
                    "data": {"fail": "nope"},
                    "opts": {fpof: True},
                },
                {"name": "fine", qkey: b, "data": {"n": 5}},
            ],
        },
        {
            "name": "lenient",
            qkey: a,
            "data": {"parent": True},
            "children": [
                {
                    "name": "bad",
                    qkey: b,
                    "data": {"fail": "ignored"},
                    "opts": {idof: True},
                },
                {"name": "fine", qkey: b, "data": {"n": 6}},
            ],
        },
    ]


def _ids(node_tree: dict[str, Any]) -> dict[str, Any]:
    """{name: id} over a tree (names are unique per tree)."""
    out = {node_tree["job"]["name"]: node_tree["job"]["id"]}
    for child in node_tree.get("children") or []:
        out.update(_ids(child))
    return out


def _check(redis_url: str, a: str, b: str, ids: list[dict[str, str]], by: str) -> None:
    """Parents' results and failures, read by Node."""
    root, doomed, lenient = ids
    qa = Queue(a, redis_url)
    value = {"by": by}
    jobs = node(
        redis_url, "read", a, [root["root"], doomed["doomed"], lenient["lenient"]]
    )
    mid = node(redis_url, "read", b, [root["mid"]])[0]
    assert jobs[0]["returnvalue"] == {
        f"bull:{a}:{root['c1']}": {"id": root["c1"], "double": 2, **value},
        f"bull:{b}:{root['c2']}": {"id": root["c2"], "double": 4, **value},
        f"bull:{b}:{root['mid']}": mid["returnvalue"],
    }
    assert mid["returnvalue"] == {
        f"bull:{a}:{root['c4']}": {"id": root["c4"], "double": 8, **value}
    }
    assert jobs[1]["failedReason"] == f"child bull:{b}:{doomed['bad']} failed"
    assert jobs[2]["returnvalue"] == {
        f"bull:{b}:{lenient['fine']}": {"id": lenient["fine"], "double": 12, **value}
    }
    deps = qa.get_job(lenient["lenient"]).get_dependencies()
    assert deps["ignored"] == {f"bull:{b}:{lenient['bad']}": "ignored"}
    assert qa.get_job(doomed["doomed"]).get_dependencies()["failed"] == [
        f"bull:{b}:{doomed['bad']}"
    ]
    qa.close()


def test_node_flow_python_workers(redis_url: str, qname: str) -> None:
    """A Node FlowProducer tree over two queues runs on Bullpen workers: each
    parent waits for its children and returns get_children_values(); an fpof
    child's failure fails its parent, an idof one is only recorded. Bullpen's
    get_flow reads the Node tree for the dashboard."""
    a, b = qname + "a", qname + "b"
    trees = [node(redis_url, "flow", t) for t in _tree(a, b, camel=True)]
    ids = [_ids(t) for t in trees]
    qa = Queue(a, redis_url)
    with python_worker(redis_url, a, "py"), python_worker(redis_url, b, "py"):
        wait_until(
            lambda: (
                qa.get_counts("completed", "failed") == {"completed": 4, "failed": 1}
            ),
            30,
            what="every parent to finish",
        )
    _check(redis_url, a, b, ids, "py")
    producer = FlowProducer(redis_url)
    tree = producer.get_flow(a, ids[0]["root"])
    assert sorted(c.job.name for c in tree.children) == ["c1", "c2", "mid"]
    [mid] = [c for c in tree.children if c.job.name == "mid"]
    assert [c.job.name for c in mid.children] == ["c4"]
    assert mid.job.queue.name == b and len(mid.job.id) == 36
    producer.close()
    qa.close()


def test_python_flow_node_workers(redis_url: str, qname: str) -> None:
    """The same trees made by Bullpen's FlowProducer run on Node workers, with
    the same results, failure and ignored child."""
    a, b = qname + "a", qname + "b"
    producer = FlowProducer(redis_url)
    trees = producer.add_bulk(_tree(a, b, camel=False))
    ids = [{n.job.name: n.job.id for n in _walk(t)} for t in trees]
    qa = Queue(a, redis_url)
    workers = [
        node_worker(redis_url, a, name="node"),
        node_worker(redis_url, b, name="node"),
    ]
    try:
        wait_until(
            lambda: (
                qa.get_counts("completed", "failed") == {"completed": 4, "failed": 1}
            ),
            30,
            what="every parent to finish",
        )
    finally:
        for w in workers:
            w.stop()
    _check(redis_url, a, b, ids, "node")
    flow = node(redis_url, "call", a, "getJobs", ["completed"])
    assert {j["name"] for j in flow} >= {"root", "lenient", "c1", "c4"}
    producer.close()
    qa.close()


def _walk(tree: Any) -> list[Any]:
    return [tree] + [n for c in tree.children for n in _walk(c)]
