"""Every Redis key of the API and webhooks, in one place.

All live under Bullpen's namespace (default `bullpen`), never inside a
queue's keys. `{q}` below is a queue key `{prefix}:{queue}`.

- `bullpen:api:rl:{token id}` (string, TTL): the token's rate-limit state
  (GCRA theoretical arrival time, ms)
- `bullpen:api:idem:{token id}:{q}:{sha256 of the key}` (string, TTL): an
  Idempotency-Key's job id, request fingerprint and state
- `bullpen:wh:queues` (set): queue keys whose events the dispatcher follows
- `bullpen:wh:subs` (hash): subscription id -> JSON (the Django admin's
  subscriptions, mirrored on save)
- `bullpen:wh:job:{q}:{job id}` (string, TTL): a job's own webhook: url,
  events, signing secret
- `bullpen:wh:outbox:{q}:{job id}:{target}` (list, TTL): delivery ids waiting
  their turn, oldest first; `...:entries` (hash) id -> delivery JSON;
  `...:seen` (set) ids ever pushed (so a re-read event is not sent twice)
- `bullpen:wh:throttle:{q}:{job id}` (hash, TTL): target -> event time (ms)
  of the last progress webhook queued
- `bullpen:wh:log:{q}:{job id}` (list, TTL): delivery attempts, newest first
"""

from __future__ import annotations

import hashlib

from gpu_workers.defaults import NAMESPACE


class ApiKeys:
    """Key names under one namespace."""

    __slots__ = ("ns", "webhook_queues", "subscriptions")

    def __init__(self, namespace: str = NAMESPACE) -> None:
        self.ns = namespace
        self.webhook_queues = f"{namespace}:wh:queues"
        self.subscriptions = f"{namespace}:wh:subs"

    def rate_limit(self, token_id: int | str) -> str:
        """A token's rate-limit state."""
        return f"{self.ns}:api:rl:{token_id}"

    def idempotency(self, token_id: int | str, queue_key: str, key: str) -> str:
        """One Idempotency-Key of one token on one queue."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{self.ns}:api:idem:{token_id}:{queue_key}:{digest}"

    def job_webhook(self, queue_key: str, job_id: str) -> str:
        """A job's own webhook."""
        return f"{self.ns}:wh:job:{queue_key}:{job_id}"

    def outbox(self, queue_key: str, job_id: str, target: str) -> str:
        """Deliveries of one job to one destination, in event order."""
        return f"{self.ns}:wh:outbox:{queue_key}:{job_id}:{target}"

    def throttle(self, queue_key: str, job_id: str) -> str:
        """Event time of the last progress webhook queued, per destination."""
        return f"{self.ns}:wh:throttle:{queue_key}:{job_id}"

    def delivery_log(self, queue_key: str, job_id: str) -> str:
        """A job's delivery attempts, newest first."""
        return f"{self.ns}:wh:log:{queue_key}:{job_id}"
