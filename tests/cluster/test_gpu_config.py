"""GPU worker settings for a Redis Cluster: a queue's name or prefix may be a
whole hash tag, and a queue without one is refused at start, in one line."""

from __future__ import annotations

import pytest

from gpu_workers.config import QueueConfig, SupervisorConfig
from gpu_workers.exceptions import ConfigError

URL = "redis+cluster://127.0.0.1:7000,127.0.0.1:7001"


def test_hash_tagged_queues_are_accepted() -> None:
    config = SupervisorConfig(
        URL,
        [QueueConfig("{render}"), QueueConfig("embed", prefix="{bull}")],
        host="h1",
    )
    assert [q.key for q in config.queues] == ["bull:{render}", "{bull}:embed"]


def test_a_queue_without_a_hash_tag_is_refused_on_a_cluster() -> None:
    with pytest.raises(ConfigError, match="hash tag") as info:
        SupervisorConfig(URL, [QueueConfig("render")], host="h1")
    assert "\n" not in str(info.value)
    # The same queue on one server needs none.
    SupervisorConfig("redis://127.0.0.1:6379/0", [QueueConfig("render")], host="h1")


@pytest.mark.parametrize(
    ("queue", "prefix"),
    [("{}", "bull"), ("{a:b}", "bull"), ("{{a}}", "bull"), ("a", "{}"), ("a", "{b")],
)
def test_braces_only_around_a_whole_safe_name(queue: str, prefix: str) -> None:
    with pytest.raises(ConfigError):
        QueueConfig(queue, prefix=prefix)
