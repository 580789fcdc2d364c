"""Writing heartbeats: the commands supervisors and workers queue on their
pipelines to publish, refresh and remove their records in Redis.

A heartbeat is a JSON string with a TTL plus an entry in an index zset
scored by its expiry, so a dead host's records vanish on their own and a
listing never scans the keyspace. The writers keep the indexes trim: each
heartbeat drops the expired entries of the index it writes, so the read
model (fleet.py) only reads and skips whatever expired since.
"""

from __future__ import annotations

from typing import Any

from queues import codec

from . import defaults
from .clock import now_ms
from .keys import BullpenKeys


def queue_heartbeat(
    pipe: Any,
    keys: BullpenKeys,
    kind: str,
    ident: str,
    record: dict[str, Any],
    ttl_s: float,
    stream: bool = True,
) -> None:
    """Queue the commands writing one heartbeat on a (sync or async) pipeline,
    and trimming the expired entries of the index it writes."""
    ttl_ms = max(int(ttl_s * 1000), 1)
    payload = codec.dumps(record)
    now = now_ms()
    if kind == "host":
        record_key, index = keys.host(ident), keys.hosts
    else:
        record_key, index = keys.worker(ident), keys.workers
    pipe.set(record_key, payload, px=ttl_ms)
    pipe.zremrangebyscore(index, "-inf", now)
    pipe.zadd(index, {ident: now + ttl_ms})
    if stream:
        pipe.xadd(
            keys.stream,
            {"kind": kind, "id": ident, "record": payload},
            maxlen=defaults.STREAM_MAXLEN,
            approximate=True,
        )


def queue_removal(
    pipe: Any, keys: BullpenKeys, kind: str, ident: str, state: str = "stopped"
) -> None:
    """Queue the commands deleting a record (a clean stop) and announcing it."""
    if kind == "host":
        pipe.delete(keys.host(ident))
        pipe.zrem(keys.hosts, ident)
    else:
        pipe.delete(keys.worker(ident))
        pipe.zrem(keys.workers, ident)
    pipe.xadd(
        keys.stream,
        {
            "kind": kind,
            "id": ident,
            "record": codec.dumps({"id": ident, "state": state}),
        },
        maxlen=defaults.STREAM_MAXLEN,
        approximate=True,
    )
