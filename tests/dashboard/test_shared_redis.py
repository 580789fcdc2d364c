"""dashboard.shared.redis: one Redis client per process for both apps, made
once even when many threads ask for it at the same moment."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from dashboard.api import store
from dashboard.shared import discovery
from dashboard.shared import redis as shared_redis


def test_the_pages_and_the_api_share_one_client(settings: Any, redis_url: str) -> None:
    settings.REDIS_URL = redis_url
    shared_redis.reset()
    try:
        assert store.client() is shared_redis.client()
        assert store.client().ping()
        assert discovery.pages_redis.client() is store.client()
    finally:
        shared_redis.reset()


def test_threads_asking_at_once_get_one_client(
    settings: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made under a lock: without it, threads that all found none each made
    one (here every one of them, as making one takes a while), and a client
    dropped by the cache closed its pool under its caller."""
    settings.REDIS_URL = redis_url
    shared_redis.reset()
    real_connect = shared_redis.connect

    def slow_connect(url: str, most_s: float | None = None) -> Any:
        time.sleep(0.2)  # a cluster client asks a node for the layout
        return real_connect(url, most_s)

    monkeypatch.setattr(shared_redis, "connect", slow_connect)
    start = threading.Barrier(8)
    got: list[redis.Redis] = []

    def ask() -> None:
        start.wait()
        got.append(shared_redis.client())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(got) == 8
        assert len({id(c) for c in got}) == 1
        assert got[0].ping()
    finally:
        shared_redis.reset()
