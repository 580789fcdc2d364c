"""Idempotency-Key: one key, one job, however often a POST is retried.

The first request claims the key in Redis (SET NX) with the job id it is
about to use, *then* adds the job, then marks the key done. A replay with the
same body gets the same job back and adds nothing; with another body it is a
422. A replay while the first request is still adding gets a 409 (retry
shortly); one after the first request died mid-way (its claim is stale) takes
over and adds the job under the claimed id, which the queue treats as a
no-op when the job is in fact there.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from ..shared import conf
from . import defaults
from .exceptions import Conflict, Unprocessable

PENDING = "pending"
DONE = "done"


@dataclass(frozen=True)
class Claim:
    """The outcome of presenting a key."""

    job_id: str
    #: False: the job was added by an earlier request; return it, add nothing.
    add: bool
    #: True: a new claim (False: taking over from a request that died).
    fresh: bool = True


def fingerprint(queue: str, body: Any) -> str:
    """What makes two requests "the same request"."""
    canonical = orjson.dumps([queue, body], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def claim(client: redis.Redis, key: str, fp: str, job_id: str) -> Claim:
    """Claim the key for `job_id`, or learn which job it already maps to."""
    ttl = conf.get().idempotency_ttl_s
    for _ in range(3):
        record = {"job_id": job_id, "fp": fp, "state": PENDING, "ts": time.time()}
        if client.set(key, orjson.dumps(record), nx=True, ex=ttl):
            return Claim(job_id, add=True)
        raw = client.get(key)
        if raw is None:
            continue  # expired between the two calls
        stored = orjson.loads(raw)
        if stored.get("fp") != fp:
            raise Unprocessable(
                "idempotency_key_reused",
                "this Idempotency-Key was used with a different request",
                {"job_id": stored.get("job_id")},
            )
        if stored.get("state") == DONE:
            return Claim(str(stored["job_id"]), add=False)
        if time.time() - float(stored.get("ts", 0)) > defaults.IDEMPOTENCY_STALE_S:
            stored["ts"] = time.time()
            client.set(key, orjson.dumps(stored), xx=True, keepttl=True)
            return Claim(str(stored["job_id"]), add=True, fresh=False)
        raise Conflict(
            "idempotency_in_progress",
            "a request with this Idempotency-Key is still being processed",
            headers={"Retry-After": "1"},
        )
    raise Conflict(
        "idempotency_in_progress",
        "this Idempotency-Key keeps changing; retry",
        headers={"Retry-After": "1"},
    )


def done(client: redis.Redis, key: str, fp: str, job_id: str) -> None:
    """Mark the key's job as added."""
    record = {"job_id": job_id, "fp": fp, "state": DONE, "ts": time.time()}
    client.set(key, orjson.dumps(record), keepttl=True)


def release(client: redis.Redis, key: str) -> None:
    """Forget a claim whose request failed before adding anything."""
    client.delete(key)
