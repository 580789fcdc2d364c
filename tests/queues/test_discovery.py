"""Queue discovery by SCAN: both markers in one pass, exact suffixes, glob
characters in a prefix taken literally; the registry that lets a first call
answer without waiting for a scan of a large keyspace."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
import redis

from queues import Queue, discovery
from queues.discovery import (
    REGISTRY_KEY,
    CachedDiscovery,
    discover_queues,
    register_queues,
    registered_queues,
)


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


def test_the_registry_follows_scans_and_lists_only_queues_that_exist(
    r: redis.Redis,
) -> None:
    """register_queues makes the registry's queues under the scanned
    prefixes those found (other prefixes' entries stay); registered_queues
    leaves out a registered queue whose keys are gone."""
    r.sadd(REGISTRY_KEY, "bull:old", "other:kept")
    for name in ("a", "b"):
        Queue(name, r).add("x", {})
    register_queues(r, ["bull"], discover_queues(r, ["bull"]))
    assert r.smembers(REGISTRY_KEY) == {"bull:a", "bull:b", "other:kept"}
    Queue("b", r).obliterate(force=True)
    assert registered_queues(r, ["bull"]) == [("bull", "a")]
    assert registered_queues(r, ["other"]) == []  # registered, but no keys


def test_a_first_call_answers_from_the_registry_while_a_scan_is_held(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a large keyspace a first get() does not wait for a scan that does
    not end: it answers with the registry's queues (nothing at all before
    any scan wrote it), and later calls have the scan's result. A scan of a
    large keyspace writes the registry, so the next process starts from it."""
    monkeypatch.setattr(discovery, "SMALL_KEYSPACE", 0)  # as if a million keys
    # The result stays fresh for max_ttl_s (60 s), not 20x the few ms this
    # scan takes: on a busy machine a poll 100 ms after it ended would
    # otherwise rescan, as it should, and the count below would be 3.
    monkeypatch.setattr(discovery, "TTL_PER_SCAN", 1e9)
    Queue("known", r).add("x", {})
    release = threading.Event()
    scans = []

    def held_scan(conn: redis.Redis, prefixes: Sequence[str]) -> list[tuple[str, str]]:
        scans.append(1)
        release.wait(10)
        return discover_queues(conn, prefixes)

    blank = CachedDiscovery(lambda: ["bull"], lambda: 60.0, lambda: 5.0, held_scan)
    assert blank.get(r) == [] and not blank.complete()
    r.sadd(REGISTRY_KEY, "bull:known")
    cache = CachedDiscovery(lambda: ["bull"], lambda: 60.0, lambda: 5.0, held_scan)
    Queue("fresh", r).add("x", {})
    assert cache.get(r) == [("bull", "known")] and not cache.complete()
    assert cache.get(r) == [("bull", "known")] and len(scans) == 2
    release.set()
    deadline = time.monotonic() + 10
    while cache.get(r) != [("bull", "fresh"), ("bull", "known")]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert cache.complete() and len(scans) == 2
    while r.smembers(REGISTRY_KEY) != {"bull:fresh", "bull:known"}:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_on_a_small_keyspace_a_first_call_waits_for_the_scan(
    r: redis.Redis,
) -> None:
    """A small keyspace scans quickly: there a first call waits for the scan
    and has its whole result, even with queues registered, as a listing
    that must be whole (`from_registry=False`) always does."""
    Queue("only", r).add("x", {})
    r.sadd(REGISTRY_KEY, "bull:only")
    Queue("other", r).add("x", {})
    release = threading.Event()

    def held_scan(conn: redis.Redis, prefixes: Sequence[str]) -> list[tuple[str, str]]:
        release.wait(10)
        return discover_queues(conn, prefixes)

    for from_registry in (True, False):
        release.clear()
        threading.Timer(0.2, release.set).start()
        cache = CachedDiscovery(
            lambda: ["bull"], lambda: 60.0, lambda: 5.0, held_scan, from_registry
        )
        assert cache.get(r) == [("bull", "only"), ("bull", "other")]
        assert cache.complete()
    assert r.smembers(REGISTRY_KEY) == {"bull:only"}  # a small keyspace's scan


def test_a_small_keyspace_scan_that_waited_for_a_cpu_is_not_kept_for_long(
    r: redis.Redis,
) -> None:
    """A scan is charged its time at most `SCAN_S_FLOOR` + `SCAN_S_PER_KEY`
    a key: time beyond that is the process waiting for a CPU (a busy host, a
    server starting up), not Redis's work. A small keyspace's scan that took
    half a second (as a busy CI host's start-up scan may) is not kept for 20x
    that (10 s), off the pages: a queue made after it shows on the call
    after the short TTL, scanned inside that call."""
    Queue("before", r).add("x", {})
    delays = [0.5]

    def scan(conn: redis.Redis, prefixes: Sequence[str]) -> list[tuple[str, str]]:
        time.sleep(delays.pop() if delays else 0)
        return discover_queues(conn, prefixes)

    cache = CachedDiscovery(lambda: ["bull"], lambda: 60.0, lambda: 5.0, scan)
    assert cache.get(r) == [("bull", "before")]
    ceiling = discovery.SCAN_S_FLOOR + discovery.SCAN_S_PER_KEY * r.dbsize()
    assert cache.scan_s <= ceiling < discovery.INLINE_SCAN_S
    assert cache.ttl() <= discovery.TTL_PER_SCAN * ceiling < 0.5
    Queue("after", r).add("x", {})
    time.sleep(cache.ttl() + 0.01)
    assert cache.get(r) == [("bull", "after"), ("bull", "before")]
    assert not delays and cache.scanning is None  # inside the call
