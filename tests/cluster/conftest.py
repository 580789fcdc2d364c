"""The cluster suite: tests written for one redis-server, run again on a real
3-primary Redis Cluster (`redis-server --cluster-enabled yes`, made with
`redis-cli --cluster create`) started once for the session.

The fixtures the single-node tests take are given cluster meanings here:
`redis_url` is a `redis+cluster://` URL (the cluster flushed before each
test), `r` a decoding `RedisCluster` client, and `qname` a queue name with a
hash tag (`{q…}`), so each test's queue sits in one slot and different
tests' queues spread over the three primaries. A module here imports the
single-node tests it re-runs; they run unchanged."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from redis.cluster import RedisCluster

from queues.cluster import parse_cluster_url
from queues.devredis import RedisClusterSet

# The dashboard pointed at the flushed cluster: tests/dashboard's fixture,
# whose `redis_url` is the cluster's here.
from tests.dashboard.conftest import dashboard_redis  # noqa: F401


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterSet]:
    """One 3-primary Redis Cluster for the whole run, on free ports."""
    cluster = RedisClusterSet(primaries=3).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def redis_url(redis_cluster: RedisClusterSet) -> str:
    """The cluster's `redis+cluster://` URL, every primary flushed first."""
    redis_cluster.flushall()
    return redis_cluster.url


@pytest.fixture
def r(redis_url: str) -> Iterator[RedisCluster]:
    """A decoding cluster client."""
    host, port = parse_cluster_url(redis_url).nodes[0]
    client = RedisCluster(host=host, port=port, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def qname() -> str:
    """A fresh queue name with a hash tag: one slot per queue."""
    return "{q" + uuid.uuid4().hex[:10] + "}"
