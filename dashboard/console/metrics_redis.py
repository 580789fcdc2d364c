"""The Redis families of /metrics (see dashboard/console/metrics.py): memory,
eviction and clients of the server, or of each primary of a cluster, read
from INFO at scrape time."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .reads.server import primaries_info


def redis_families() -> Iterable[Metric]:
    """Memory, eviction and clients of the server (each primary of a cluster)."""
    nodes = primaries_info()

    def gauge(name: str, doc: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=["node"])

    used = gauge("bullpen_redis_memory_used_bytes", "Memory Redis has allocated")
    limit = gauge("bullpen_redis_memory_max_bytes", "maxmemory (0: no limit)")
    clients = gauge("bullpen_redis_connected_clients", "Client connections")
    policy = GaugeMetricFamily(
        "bullpen_redis_maxmemory_policy",
        "1 for the eviction policy (queues need noeviction)",
        labels=["node", "policy"],
    )
    evicted = CounterMetricFamily(
        "bullpen_redis_evicted_keys", "Keys Redis evicted", labels=["node"]
    )
    for n in nodes:
        used.add_metric([n.node], n.number("used_memory"))
        limit.add_metric([n.node], n.number("maxmemory"))
        clients.add_metric([n.node], n.number("connected_clients"))
        policy.add_metric([n.node, str(n.info.get("maxmemory_policy", ""))], 1)
        evicted.add_metric([n.node], n.number("evicted_keys"))
    return [used, limit, policy, evicted, clients]
