"""Flows on a 3-primary Redis Cluster: the single-node flow tests re-run
(their queues share the test's hash tag, so a tree sits in one slot), and a
flow whose queues would span slots is refused before anything is written."""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster

from queues import FlowProducer, Queue
from queues.cluster import FlowAcrossSlots, NoHashTag, slot_of
from tests.queues.test_flows_and_schedulers import *  # noqa: F403
from tests.queues.transitions.test_flow_failures import *  # noqa: F403
from tests.queues.transitions.test_release_parent import *  # noqa: F403


def _two_slots() -> tuple[str, str]:
    a, b = "{render}", "{embed}"
    assert slot_of(f"bull:{a}:") != slot_of(f"bull:{b}:")
    return a, b


def test_a_flow_across_slots_is_refused_and_writes_nothing(
    redis_url: str, r: RedisCluster
) -> None:
    parent_queue, child_queue = _two_slots()
    with FlowProducer(redis_url) as flows:
        with pytest.raises(FlowAcrossSlots) as refused:
            flows.add(
                {
                    "name": "parent",
                    "queue_name": parent_queue,
                    "children": [{"name": "child", "queue_name": child_queue}],
                }
            )
    message = str(refused.value)
    assert "{render}" in message and "{embed}" in message and "hash tag" in message
    assert list(r.scan_iter(match="bull:*")) == []


def test_a_flow_in_one_tag_spans_queues(redis_url: str) -> None:
    """Queues under prefix {bull} share a slot: a parent in one and children
    in another is one transaction on one primary."""
    with FlowProducer(redis_url, prefix="{bull}") as flows:
        tree = flows.add(
            {
                "name": "parent",
                "queue_name": "render",
                "children": [
                    {"name": "a", "queue_name": "embed"},
                    {"name": "b", "queue_name": "embed"},
                ],
            }
        )
    with Queue("render", redis_url, prefix="{bull}") as render:
        assert render.get_job_state(tree.job.id) == "waiting-children"
    with Queue("embed", redis_url, prefix="{bull}") as embed:
        assert embed.get_counts("waiting") == {"waiting": 2}


def test_a_flow_queue_without_a_tag_is_refused(redis_url: str) -> None:
    with FlowProducer(redis_url) as flows:
        with pytest.raises(NoHashTag, match="prefix='\\{bull\\}'"):
            flows.add({"name": "p", "queue_name": "plain"})
