"""Per-token rate limit in Redis (GCRA), shared by every API process."""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis

from . import scripts
from .exceptions import RateLimited

PERIOD_MS = 60_000


@dataclass(frozen=True)
class Allowance:
    """What the rate-limit headers report."""

    limit: int
    remaining: int

    def headers(self) -> dict[str, str]:
        """RateLimit-Limit / RateLimit-Remaining."""
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(max(self.remaining, 0)),
        }


def take(client: redis.Redis, key: str, per_minute: int) -> Allowance:
    """Count one request; RateLimited (429, Retry-After) when over the limit."""
    allowed, remaining, retry_ms = scripts.script(client, "rate_limit")(
        keys=[key], args=[int(time.time() * 1000), per_minute, PERIOD_MS]
    )
    if int(allowed):
        return Allowance(per_minute, int(remaining))
    retry_s = max(1, -(-int(retry_ms) // 1000))
    raise RateLimited(
        "rate_limited",
        f"this token may make {per_minute} requests per minute",
        {"retry_after_s": retry_s},
        headers={
            "Retry-After": str(retry_s),
            "RateLimit-Limit": str(per_minute),
            "RateLimit-Remaining": "0",
        },
    )
