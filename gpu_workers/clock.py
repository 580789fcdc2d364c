"""The wall clock that heartbeats, job records and the read model share."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Wall-clock milliseconds (heartbeat expiries are compared across hosts)."""
    return int(time.time() * 1000)
