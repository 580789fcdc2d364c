"""Tunables of the producer API and webhooks, with their units in their names.

The ones an operator sets (the API and webhook settings) take their
defaults from the table in gpu_workers/settings.py, the one place they are
written; `dashboard.shared.conf` reads them.
"""

from __future__ import annotations

from gpu_workers.settings import default
from queues.events import EventName

#: Largest request body the API reads.
MAX_BODY_BYTES: int = default("max_body_bytes")
#: Deepest nesting of arrays and objects a request body may have (the JSON
#: encoder stops at 254 levels; nobody's job data needs more than a few).
MAX_JSON_DEPTH = 64
#: Requests per minute per token, unless the token sets its own.
RATE_LIMIT_PER_MIN: int = default("rate_limit_per_min")
#: How long an Idempotency-Key keeps mapping to its job.
IDEMPOTENCY_TTL_S: int = default("idempotency_ttl_s")
#: A replayed Idempotency-Key whose first request has not finished adding its
#: job after this long is taken over (the first request died).
IDEMPOTENCY_STALE_S = 10
#: Longest Server-Sent Events connection; the client reconnects with Last-Event-ID.
SSE_MAX_S: float = default("sse_max_s")
#: Comment lines keep idle SSE connections open through proxies.
SSE_KEEPALIVE_S: float = default("sse_keepalive_s")
#: Events replayed at most when an SSE client resumes.
SSE_REPLAY_MAX = 1000
#: Milliseconds an EventSource waits before reconnecting (the `retry:` field).
SSE_RETRY_MS = 2000
#: Lifetime of the read-only job tickets in `status_url` / `events_url`.
TICKET_MAX_AGE_S: int = default("ticket_max_age_s")

#: Queue (under the API's prefix) whose jobs are webhook deliveries.
WEBHOOK_QUEUE: str = default("webhook_queue")
#: Consumer group the dispatcher reads the queues' events streams with.
WEBHOOK_GROUP = "bullpen-webhooks"
#: One delivery: connect + each read.
WEBHOOK_TIMEOUT_S: float = default("webhook_timeout_s")
#: Attempts per delivery and the first exponential backoff delay.
WEBHOOK_ATTEMPTS: int = default("webhook_attempts")
WEBHOOK_BACKOFF_MS: int = default("webhook_backoff_ms")
#: At most one progress webhook per job and destination per this period
#: (event time), the latest progress otherwise coalesced away.
WEBHOOK_PROGRESS_INTERVAL_MS: int = default("webhook_progress_interval_ms")
#: Deliveries running at once in one dispatcher.
WEBHOOK_CONCURRENCY: int = default("webhook_concurrency")
#: Lock of a running delivery job; a dispatcher killed mid-delivery has its
#: jobs picked up again after about this long.
WEBHOOK_LOCK_DURATION_MS: int = default("webhook_lock_duration_ms")
#: Stream entries a dead dispatcher read but never acknowledged are claimed by
#: another after this idle time.
WEBHOOK_CLAIM_IDLE_MS: int = default("webhook_claim_idle_ms")
#: Entries read per XREADGROUP call and how long it blocks.
WEBHOOK_READ_COUNT = 200
WEBHOOK_BLOCK_MS = 1000
#: How often the dispatcher re-reads which queues to follow.
WEBHOOK_REFRESH_S = 1.0
#: Per-job webhook records, outboxes and delivery logs expire after this.
WEBHOOK_RECORD_TTL_S = 7 * 24 * 3600
#: Attempts kept in a job's delivery log (newest first).
WEBHOOK_LOG_MAX = 200
#: Response body bytes kept in the delivery log.
WEBHOOK_RESPONSE_EXCERPT_BYTES = 512
#: Events a webhook can be sent for.
WEBHOOK_EVENTS = (
    EventName.ACTIVE,
    EventName.PROGRESS,
    EventName.COMPLETED,
    EventName.FAILED,
)
