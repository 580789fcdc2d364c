"""The CLI on a Redis Cluster: `python -m queues --redis redis+cluster://...`
works on a queue with a hash tag, and a bad URL, an unreachable cluster or a
queue without a hash tag is one `error:` line (as for Sentinel in
tests/queues/test_sentinel.py)."""

from __future__ import annotations

import json

from queues import Queue
from queues.devredis import free_port
from tests.queues.test_cli import assert_error, cli, ok


def test_the_cli_through_a_cluster(redis_url: str, qname: str) -> None:
    """add, counts and pause act on the queue's slot, wherever it lives."""
    ok(cli(redis_url, "add", qname, "n", "--data", '{"x": 1}'))
    ok(cli(redis_url, "add", qname, "n", "--data", '{"x": 2}'))
    assert json.loads(ok(cli(redis_url, "counts", qname, "--json")))["waiting"] == 2
    ok(cli(redis_url, "pause", qname))
    with Queue(qname, redis_url) as q:
        assert q.is_paused()
        assert q.get_counts("waiting") == {"waiting": 2}


def test_the_cli_says_what_is_wrong_with_a_cluster_url_in_one_line() -> None:
    assert_error(cli("redis+cluster://:hunter2@h:x", "counts", "{q}"), "bad port")
    assert_error(cli("redis+cluster://h:7000/3", "counts", "{q}"), "db 0")
    result = cli("redis+cluster://:hunter2@h:x", "counts", "{q}")
    assert "hunter2" not in result.stderr


def test_an_unreachable_cluster_is_one_line() -> None:
    url = f"redis+cluster://:hunter2@127.0.0.1:{free_port()}"
    result = cli(url, "counts", "{q}")
    assert_error(result, "cannot reach Redis")
    assert "hunter2" not in result.stderr


def test_a_queue_without_a_hash_tag_is_refused_in_one_line(redis_url: str) -> None:
    assert_error(cli(redis_url, "add", "plain", "n"), "hash tag")
