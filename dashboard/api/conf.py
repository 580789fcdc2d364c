"""Typed access to the API's settings, each falling back to `defaults`.

`dashboard/settings.py` is the only module reading the environment; this
module only reads `django.conf.settings`, at call time, so tests that change a
setting see the change at once.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings

from . import defaults

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _get(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def redis_url() -> str:
    """The Redis holding the queues and Bullpen's keys."""
    return str(settings.REDIS_URL)


def namespace() -> str:
    """Bullpen's own Redis namespace (never a queue prefix)."""
    return str(_get("BULLPEN_NAMESPACE", "bullpen"))


def prefix() -> str:
    """The key prefix of the queues the API serves."""
    prefixes = _get("BULLPEN_PREFIXES", ["bull"]) or ["bull"]
    return str(_get("BULLPEN_API_PREFIX", prefixes[0]))


def max_body_bytes() -> int:
    """Largest request body read."""
    return int(_get("BULLPEN_API_MAX_BODY_BYTES", defaults.MAX_BODY_BYTES))


def rate_limit_per_min() -> int:
    """Default per-token request rate."""
    return int(_get("BULLPEN_API_RATE_LIMIT_PER_MIN", defaults.RATE_LIMIT_PER_MIN))


def idempotency_ttl_s() -> int:
    """How long an Idempotency-Key maps to its job."""
    return int(_get("BULLPEN_API_IDEMPOTENCY_TTL_S", defaults.IDEMPOTENCY_TTL_S))


def sse_max_s() -> float:
    """Longest SSE connection."""
    return float(_get("BULLPEN_API_SSE_MAX_S", defaults.SSE_MAX_S))


def sse_keepalive_s() -> float:
    """Period of SSE keep-alive comments."""
    return float(_get("BULLPEN_API_SSE_KEEPALIVE_S", defaults.SSE_KEEPALIVE_S))


def ticket_max_age_s() -> int:
    """Lifetime of job read tickets."""
    return int(_get("BULLPEN_API_TICKET_MAX_AGE_S", defaults.TICKET_MAX_AGE_S))


def webhook_allow_private() -> bool:
    """Whether webhooks may go to private, loopback and link-local addresses."""
    return bool(_get("BULLPEN_WEBHOOK_ALLOW_PRIVATE", False))


def webhook_allowed_networks() -> tuple[Network, ...]:
    """Networks allowed even though they are not public (e.g. 10.1.2.0/24)."""
    raw = _get("BULLPEN_WEBHOOK_ALLOWED_NETWORKS", []) or []
    return tuple(ipaddress.ip_network(n, strict=False) for n in raw)


def webhook_queue() -> str:
    """The queue whose jobs are webhook deliveries."""
    return str(_get("BULLPEN_WEBHOOK_QUEUE", defaults.WEBHOOK_QUEUE))


def webhook_timeout_s() -> float:
    """Timeout of one delivery (connect, each read)."""
    return float(_get("BULLPEN_WEBHOOK_TIMEOUT_S", defaults.WEBHOOK_TIMEOUT_S))


def webhook_attempts() -> int:
    """Attempts per delivery."""
    return int(_get("BULLPEN_WEBHOOK_ATTEMPTS", defaults.WEBHOOK_ATTEMPTS))


def webhook_backoff_ms() -> int:
    """First exponential backoff delay of a delivery."""
    return int(_get("BULLPEN_WEBHOOK_BACKOFF_MS", defaults.WEBHOOK_BACKOFF_MS))


def webhook_progress_interval_ms() -> int:
    """Least event time between two progress webhooks of a job and destination."""
    return int(
        _get(
            "BULLPEN_WEBHOOK_PROGRESS_INTERVAL_MS",
            defaults.WEBHOOK_PROGRESS_INTERVAL_MS,
        )
    )


def webhook_concurrency() -> int:
    """Deliveries running at once per dispatcher."""
    return int(_get("BULLPEN_WEBHOOK_CONCURRENCY", defaults.WEBHOOK_CONCURRENCY))


def webhook_lock_duration_ms() -> int:
    """Lock of a running delivery (and the stalled-check period)."""
    return int(
        _get("BULLPEN_WEBHOOK_LOCK_DURATION_MS", defaults.WEBHOOK_LOCK_DURATION_MS)
    )


def webhook_claim_idle_ms() -> int:
    """Idle time after which a dead dispatcher's unacknowledged entries are claimed."""
    return int(_get("BULLPEN_WEBHOOK_CLAIM_IDLE_MS", defaults.WEBHOOK_CLAIM_IDLE_MS))


def hostname() -> str:
    """This host's name (the dispatcher's consumer name)."""
    return str(_get("BULLPEN_HOSTNAME", "localhost"))
