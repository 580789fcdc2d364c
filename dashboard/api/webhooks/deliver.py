"""The delivery job's processor: sign, send, record the attempt, and move
the outbox on once the delivery is done for good."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from queues import Job, UnrecoverableError

from ..exceptions import DestinationRefused
from ..keys import ApiKeys
from . import deliveries, registry, sender, signing, ssrf
from .outbox import Outbox

log = logging.getLogger("dashboard.api.webhooks")


@dataclass
class Deliverer:
    """Delivers the webhook that a delivery job describes."""

    client: redis.Redis
    keys: ApiKeys
    outbox: Outbox
    policy: ssrf.Policy
    timeout_s: float
    record_ttl_s: int
    resolver: ssrf.Resolver = ssrf.system_resolver

    def secret_for(self, entry: dict[str, Any]) -> str | None:
        """The signing secret of the delivery's destination (None: it is gone)."""
        if entry["target"] == "job":
            record = registry.job_webhook(
                self.client, self.keys, entry["queue_key"], entry["job_id"]
            )
            return record["secret"] if record else None
        sub = registry.subscription(self.client, self.keys, entry["target"][3:])
        if sub is None or not sub.get("active"):
            return None
        return str(sub["secret"])

    def __call__(self, job: Job) -> dict[str, Any]:
        """Process one delivery job (runs in the worker's thread pool)."""
        entry: dict[str, Any] = job.data
        attempt = job.attempts_made + 1
        final = attempt >= job.attempts
        body = orjson.dumps({**entry["payload"], "attempt": attempt})
        started = time.time()
        status: int | None = None
        try:
            secret = self.secret_for(entry)
            if secret is None:
                raise DestinationRefused(
                    "the webhook no longer exists (subscription removed or "
                    "inactive, or the job's record expired)"
                )
            headers = {
                signing.EVENT_HEADER: entry["event"],
                signing.DELIVERY_HEADER: entry["delivery_id"],
                **signing.signature_headers(secret, body),
            }
            response = sender.post(
                entry["url"], body, headers, self.policy, self.timeout_s, self.resolver
            )
            status = response.status
        except DestinationRefused as exc:
            status = getattr(exc, "status", None)
            self._record(entry, attempt, started, status, "refused", str(exc))
            self.outbox.finish(entry)
            raise UnrecoverableError(f"webhook refused: {exc}") from None
        except OSError as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self._fail(entry, attempt, started, None, error, final)
        if not response.ok:
            self._fail(
                entry,
                attempt,
                started,
                status,
                f"HTTP {status}: {response.excerpt[:200]}",
                final,
            )
        self._record(entry, attempt, started, status, "delivered", None)
        self.outbox.finish(entry)
        return {"status": status, "attempt": attempt}

    def _fail(
        self,
        entry: dict[str, Any],
        attempt: int,
        started: float,
        status: int | None,
        error: str,
        final: bool,
    ) -> None:
        self._record(
            entry, attempt, started, status, "failed" if final else "retrying", error
        )
        if final:
            self.outbox.finish(entry)
        raise RuntimeError(f"webhook to {entry['url']} failed: {error}")

    def _record(
        self,
        entry: dict[str, Any],
        attempt: int,
        started: float,
        status: int | None,
        outcome: str,
        error: str | None,
    ) -> None:
        deliveries.record(
            self.client,
            self.keys,
            entry["queue_key"],
            entry["job_id"],
            {
                "delivery_id": entry["delivery_id"],
                "event": entry["event"],
                "event_id": entry["event_id"],
                "target": entry["target"],
                "url": entry["url"],
                "attempt": attempt,
                "at_ms": int(started * 1000),
                "duration_ms": int((time.time() - started) * 1000),
                "status_code": status,
                "outcome": outcome,
                "error": error[:500] if error else None,
            },
            self.record_ttl_s,
        )
        if outcome != "delivered":
            log.warning(
                "webhook %s (%s of job %s) attempt %d %s: %s",
                entry["delivery_id"],
                entry["event"],
                entry["job_id"],
                attempt,
                outcome,
                error,
            )
