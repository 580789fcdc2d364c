"""QueueEvents on a 3-primary Redis Cluster: the single-node tests that take a
URL, among them a quiet stream outwaited by a cluster client with a short read
timeout (for_blocking makes a cluster sibling that waits longer)."""

from __future__ import annotations

from tests.queues.test_events import (  # noqa: F401 (re-run here)
    test_an_idle_stream_blocks_for_the_whole_block_not_the_read_timeout,
    test_dollar_means_only_new_events,
    test_events_from_start_are_typed,
)
