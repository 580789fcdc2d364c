"""Which webhooks exist, in Redis, where the dispatcher reads them.

- A job's own webhook (from its enqueue request) is written *before* the job
  is added, so no event of the job can precede it. It holds the job's
  `timestamp`: a later job that reuses the id (after the first was removed)
  is not its job, and the record is dropped when that job shows up.
- The admin's queue subscriptions live in the Django database and are
  mirrored into one hash on every save and delete (and re-synced by
  `manage.py runwebhooks` at start), so the dispatcher never needs the DB.
- Following a queue adds it to a set and creates the dispatcher's consumer
  group on its events stream at `$`, before any job that needs a webhook is
  added, so none of its events predates the group.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
import redis
from redis.exceptions import ResponseError

from queues import codec
from queues.keys import QueueKeys
from queues.names import qualified_name, split_qualified_name

from .. import defaults
from ..keys import ApiKeys


def events_key(queue_key: str) -> str:
    """The events stream of `{prefix}:{queue}`."""
    prefix, name = split_qualified_name(queue_key)
    return QueueKeys(name, prefix).events


def ensure_group(
    client: redis.Redis, queue_key: str, group: str = defaults.WEBHOOK_GROUP
) -> None:
    """Create the consumer group at the stream's end unless it exists."""
    try:
        client.xgroup_create(events_key(queue_key), group, id="$", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def follow(
    client: redis.Redis,
    keys: ApiKeys,
    queue_key: str,
    group: str = defaults.WEBHOOK_GROUP,
) -> None:
    """Have the dispatcher follow a queue's events from now on."""
    pipe = client.pipeline(transaction=False)
    pipe.sadd(keys.webhook_queues, queue_key)
    pipe.xgroup_create(events_key(queue_key), group, id="$", mkstream=True)
    for result in pipe.execute(raise_on_error=False):
        if isinstance(result, ResponseError) and "BUSYGROUP" not in str(result):
            raise result


def set_job_webhook(
    client: redis.Redis,
    keys: ApiKeys,
    queue_key: str,
    job_id: str,
    url: str,
    events: Iterable[str],
    secret: str,
    job_ts: int,
    ttl_s: int = defaults.WEBHOOK_RECORD_TTL_S,
) -> None:
    """Record a job's own webhook (before the job is added with `timestamp`
    `job_ts`, which binds the record to that job, not to its id)."""
    record = {"url": url, "events": list(events), "secret": secret, "job_ts": job_ts}
    client.set(keys.job_webhook(queue_key, job_id), orjson.dumps(record), ex=ttl_s)


def clear_job_webhook(
    client: redis.Redis, keys: ApiKeys, queue_key: str, job_id: str
) -> None:
    """Forget the webhook recorded for a job of this id (a stale one)."""
    client.delete(keys.job_webhook(queue_key, job_id))


def job_webhook(
    client: redis.Redis, keys: ApiKeys, queue_key: str, job_id: str
) -> dict[str, Any] | None:
    """A job's own webhook, or None."""
    raw = client.get(keys.job_webhook(queue_key, job_id))
    return orjson.loads(raw) if raw else None


def bound_job_webhook(
    client: redis.Redis, keys: ApiKeys, queue_key: str, job_id: str
) -> dict[str, Any] | None:
    """The job's own webhook when it was recorded for the job that now holds
    this id, or for one that is gone (these are its last events). A record of
    an earlier job whose id a later job reuses is deleted: its owner must not
    receive the later job's events."""
    record = job_webhook(client, keys, queue_key, job_id)
    if record is None or "job_ts" not in record:
        return record
    prefix, name = split_qualified_name(queue_key)
    ts = client.hget(QueueKeys(name, prefix).job(job_id), "timestamp")
    if ts is None or codec.to_int(str(ts)) == record["job_ts"]:
        return record
    clear_job_webhook(client, keys, queue_key, job_id)
    return None


def mirror_subscription(
    client: redis.Redis, keys: ApiKeys, sub: dict[str, Any]
) -> None:
    """Write (or overwrite) one subscription and follow its queue."""
    client.hset(keys.subscriptions, str(sub["id"]), orjson.dumps(sub))
    if sub.get("active"):
        follow(client, keys, qualified_name(sub["prefix"], sub["queue"]))


def forget_subscription(client: redis.Redis, keys: ApiKeys, sub_id: int | str) -> None:
    """Drop a deleted subscription."""
    client.hdel(keys.subscriptions, str(sub_id))


def sync_subscriptions(
    client: redis.Redis, keys: ApiKeys, subs: list[dict[str, Any]]
) -> None:
    """Make the mirror exactly `subs` (the database's rows)."""
    pipe = client.pipeline(transaction=True)
    pipe.delete(keys.subscriptions)
    if subs:
        pipe.hset(
            keys.subscriptions,
            mapping={str(s["id"]): orjson.dumps(s) for s in subs},
        )
    pipe.execute()
    for sub in subs:
        if sub.get("active"):
            follow(client, keys, qualified_name(sub["prefix"], sub["queue"]))


def subscriptions(client: redis.Redis, keys: ApiKeys) -> list[dict[str, Any]]:
    """Every mirrored subscription."""
    out = []
    for raw in client.hgetall(keys.subscriptions).values():
        try:
            out.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            continue
    return out


def subscription(
    client: redis.Redis, keys: ApiKeys, sub_id: int | str
) -> dict[str, Any] | None:
    """One mirrored subscription, or None."""
    raw = client.hget(keys.subscriptions, str(sub_id))
    return orjson.loads(raw) if raw else None


def followed_queues(client: redis.Redis, keys: ApiKeys) -> set[str]:
    """Queue keys to follow: those with job webhooks or active subscriptions."""
    found = {str(q) for q in client.smembers(keys.webhook_queues)}
    for sub in subscriptions(client, keys):
        if sub.get("active"):
            found.add(qualified_name(sub["prefix"], sub["queue"]))
    return found
