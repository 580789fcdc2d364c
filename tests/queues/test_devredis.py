"""The throwaway redis-server of tests, benches and `make run`
(queues/devredis.py): a port it picked itself and another process bound
before redis-server did is picked again, never a failed start."""

from __future__ import annotations

import socket

import pytest
import redis

from queues.devredis import RedisClusterSet, RedisServer


def taken(port: int) -> socket.socket:
    """A socket listening on `port`, as another process's would be."""
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_a_picked_port_taken_before_the_start_is_picked_again() -> None:
    server = RedisServer()
    first = server.port
    with taken(first):
        server.start()
        try:
            assert server.port != first
            assert redis.Redis(port=server.port).ping()
        finally:
            server.stop()


def test_a_port_given_or_known_to_clients_is_never_changed() -> None:
    """A port the caller named, or the port of a restart (its clients know
    it), stays: taken, the start fails saying which."""
    other = RedisServer().start()
    try:
        with pytest.raises(RuntimeError, match=str(other.port)):
            RedisServer(port=other.port).start()
    finally:
        other.stop()
    server = RedisServer().start()
    try:
        port = server.port
        server.stop()
        with taken(port), pytest.raises(RuntimeError, match=str(port)):
            server.start()
    finally:
        server.stop()


def test_a_cluster_node_whose_bus_port_was_taken_starts_on_new_ports() -> None:
    cluster = RedisClusterSet(primaries=3)
    node = cluster.servers[0]
    bus = int(node.extra_args[node.extra_args.index("--cluster-port") + 1])
    with taken(bus):
        cluster.start()
        try:
            assert str(bus) not in node.extra_args
            client = redis.RedisCluster(host="127.0.0.1", port=node.port)
            assert client.cluster_info()["cluster_state"] == "ok"
            client.close()
        finally:
            cluster.stop()


def test_a_sentinel_from_a_config_text_is_picked_again_too() -> None:
    """A config text (what only a file may hold: a sentinel's `sentinel
    monitor`) is read first; a sentinel whose picked port was taken starts on
    another, monitoring what its text says."""
    primary = RedisServer().start()
    sentinel = RedisServer(
        extra_args=("--sentinel",),
        config=f"sentinel monitor m 127.0.0.1 {primary.port} 1\n",
    )
    first = sentinel.port
    try:
        with taken(first):
            sentinel.start()
        assert sentinel.port != first
        client = redis.Redis(port=sentinel.port, decode_responses=True)
        assert client.info("server")["redis_mode"] == "sentinel"
        assert client.sentinel_master("m")["port"] == primary.port
        client.close()
    finally:
        sentinel.stop()
        primary.stop()
