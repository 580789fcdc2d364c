"""Each job's webhook delivery attempts and their outcomes, kept in Redis
beside the job (newest first, capped, expiring) for its page and the API.

Outcomes: `delivered` (2xx), `retrying` (failed, another attempt is
scheduled), `failed` (failed for the last time), `refused` (the destination
or its redirect is not allowed, or the webhook is gone; never retried).
"""

from __future__ import annotations

from typing import Any

import orjson
import redis
from django.template.loader import render_to_string

from queues.names import qualified_name

from .. import defaults, store
from ..keys import ApiKeys


def record(
    client: redis.Redis,
    keys: ApiKeys,
    queue_key: str,
    job_id: str,
    attempt: dict[str, Any],
    ttl_s: int = defaults.WEBHOOK_RECORD_TTL_S,
) -> None:
    """Add one attempt to a job's delivery log."""
    key = keys.delivery_log(queue_key, job_id)
    pipe = client.pipeline(transaction=False)
    pipe.lpush(key, orjson.dumps(attempt))
    pipe.ltrim(key, 0, defaults.WEBHOOK_LOG_MAX - 1)
    pipe.expire(key, ttl_s)
    pipe.execute()


def for_job(
    client: redis.Redis, keys: ApiKeys, queue_key: str, job_id: str, limit: int = 50
) -> list[dict[str, Any]]:
    """A job's delivery attempts, newest first."""
    out = []
    for raw in client.lrange(keys.delivery_log(queue_key, job_id), 0, limit - 1):
        try:
            out.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            continue
    return out


def for_dashboard(prefix: str, queue: str, job_id: str) -> list[dict[str, Any]]:
    """A job's delivery attempts for the job page (Django settings' Redis)."""
    return for_job(store.client(), store.keys(), qualified_name(prefix, queue), job_id)


def job_panel(prefix: str, queue: str, job_id: str) -> str:
    """The job page's webhook deliveries panel (dashboard/shared/panels.py),
    empty when no delivery was made for the job."""
    rows = for_dashboard(prefix, queue, job_id)
    if not rows:
        return ""
    return render_to_string("api/_deliveries.html", {"deliveries": rows})
