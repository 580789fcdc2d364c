"""Per job and destination, webhooks leave in event order: each delivery
waits in an outbox until the one before it has finished (delivered, or
failed for good), and only the outbox's head is a job of the delivery queue.

Delivery ids are derived from the event's stream id and the destination, and
become the delivery jobs' ids, so pushing or enqueuing the same delivery
twice (a dispatcher that died before acknowledging, two workers racing on an
outbox) changes nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from queues import Queue
from queues.events import EventName

from .. import defaults, scripts
from ..keys import ApiKeys


def delivery_id(queue_key: str, event_id: str, target: str) -> str:
    """The stable id of one event's delivery to one destination."""
    digest = hashlib.sha1(f"{queue_key}|{event_id}|{target}".encode()).hexdigest()
    return "wh-" + digest[:24]


@dataclass(frozen=True)
class DeliveryOptions:
    """How delivery jobs are added."""

    attempts: int = defaults.WEBHOOK_ATTEMPTS
    backoff_ms: int = defaults.WEBHOOK_BACKOFF_MS
    record_ttl_s: int = defaults.WEBHOOK_RECORD_TTL_S

    def job_options(self) -> dict[str, Any]:
        """Keyword arguments of `Queue.add` for a delivery job."""
        return {
            "attempts": self.attempts,
            "backoff": {"type": "exponential", "delay": self.backoff_ms},
            "remove_on_complete": {"age": 24 * 3600, "count": 10_000},
            "remove_on_fail": {"age": 7 * 24 * 3600, "count": 10_000},
        }


class Outbox:
    """Pushes deliveries in order and keeps each outbox's head enqueued."""

    def __init__(
        self,
        client: redis.Redis,
        keys: ApiKeys,
        delivery_queue: Queue,
        options: DeliveryOptions,
    ) -> None:
        self.client = client
        self.keys = keys
        self.queue = delivery_queue
        self.options = options

    def _outbox_keys(self, entry: dict[str, Any]) -> list[str]:
        base = self.keys.outbox(entry["queue_key"], entry["job_id"], entry["target"])
        return [base, f"{base}:entries", f"{base}:seen"]

    def push(
        self, entry: dict[str, Any], event_ms: int, progress_interval_ms: int
    ) -> str:
        """Queue one delivery behind the earlier ones of its job and target;
        returns "pushed", "seen" or "throttled"."""
        keys = self._outbox_keys(entry)
        keys.append(self.keys.throttle(entry["queue_key"], entry["job_id"]))
        status, head_id, head = scripts.script(self.client, "outbox_push")(
            keys=keys,
            args=[
                entry["delivery_id"],
                orjson.dumps(entry),
                self.options.record_ttl_s * 1000,
                entry["target"],
                event_ms,
                progress_interval_ms if entry["event"] == EventName.PROGRESS else 0,
            ],
        )
        if head_id and head:
            self._enqueue(head_id, head)
        return str(status)

    def finish(self, entry: dict[str, Any]) -> None:
        """The delivery is done for good: enqueue the next one of its outbox."""
        base, entries, _ = self._outbox_keys(entry)
        head_id, head = scripts.script(self.client, "outbox_pop")(
            keys=[base, entries], args=[entry["delivery_id"]]
        )
        if head_id and head:
            self._enqueue(head_id, head)

    def _enqueue(self, head_id: str, head: str) -> None:
        data = orjson.loads(head)
        # A job id that exists already (running, finished, retrying) makes
        # this a no-op, which is what keeps pushes and pops idempotent.
        self.queue.add(
            data["event"], data, job_id=head_id, **self.options.job_options()
        )
