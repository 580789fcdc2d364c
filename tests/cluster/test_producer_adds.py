"""Concurrent adds on a Redis Cluster, auto-pipelined through redis-py's
cluster pipeline (queues.hotpath, queues.clusterdrive): the same ids, order,
error isolation and NOSCRIPT handling as on one node. Before, 200 adds
awaited at once on an asyncio cluster client raised AttributeError inside
redis-py or stored some jobs twice."""

from __future__ import annotations

from tests.queues.test_producer_adds import (  # noqa: F401
    test_adds_survive_a_script_flush,
    test_concurrent_adds_go_out_as_pipelines_each_with_its_own_id,
    test_each_caller_keeps_its_order,
    test_one_bad_job_in_a_batch_fails_alone,
)
