"""The webhook dispatcher's stream reader waits out a Redis outage and logs
it once, not once per retry."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from dashboard.api.webhooks.dispatcher import Dispatcher, DispatcherConfig
from tests.helpers import wait_until
from tests.redis_server import RedisServer


def test_reader_logs_an_outage_once(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis is down for 4 s under a running reader: one line when the
    outage starts, one when Redis answers again, and the reader still runs."""
    config = DispatcherConfig(redis_url=own_redis.url, deliver=False, block_ms=100)
    dispatcher = Dispatcher(config)
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.reader.run, args=(stop,), daemon=True)
    with caplog.at_level(logging.WARNING, "dashboard.api.webhooks"):
        thread.start()
        try:
            time.sleep(0.3)
            own_redis.stop()
            time.sleep(4.0)
            own_redis.start()
            wait_until(
                lambda: any("again" in r.getMessage() for r in caplog.records),
                10,
                what="the reader to notice Redis is back",
            )
            assert thread.is_alive()
        finally:
            stop.set()
            thread.join(10)
            dispatcher.client.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if "unavailable" in m]) == 1, lines
