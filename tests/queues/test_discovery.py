"""Queue discovery by SCAN: both markers in one pass, exact suffixes, glob
characters in a prefix taken literally."""

from __future__ import annotations

import redis

from queues import Queue
from queues.discovery import discover_queues


def test_finds_queues_by_meta_or_id_and_nothing_else(r: redis.Redis) -> None:
    Queue("added", r).add("x", {})  # writes :id (and :meta)
    r.hset("bull:meta-only:meta", "opts.maxLenEvents", 10)
    r.set("bull:id-only:id", 7)
    r.hset("bull:no-marker:1", "name", "x")  # a lone job hash
    r.hset("bull:no-marker:metrics:completed", "count", 1)
    r.hset("bull:x:1:identity", "a", 1)  # matches the glob, not a marker
    r.hset("other:elsewhere:meta", "a", 1)
    assert discover_queues(r, ["bull"]) == [
        ("bull", "added"),
        ("bull", "id-only"),
        ("bull", "meta-only"),
    ]
    assert discover_queues(r, ["bull", "other"])[-1] == ("other", "elsewhere")


def test_glob_characters_in_a_prefix_are_literal(r: redis.Redis) -> None:
    r.hset("p[1]*:q:meta", "a", 1)
    r.hset("p1x:q2:meta", "a", 1)
    assert discover_queues(r, ["p[1]*"]) == [("p[1]*", "q")]


def test_small_scan_count_still_finds_everything(r: redis.Redis) -> None:
    for i in range(50):
        r.hset(f"bull:q{i:02d}:meta", "a", 1)
        r.hset(f"bull:q{i:02d}:{i}", "name", "x")
    found = discover_queues(r, ["bull"], scan_count=3)
    assert found == [("bull", f"q{i:02d}") for i in range(50)]
