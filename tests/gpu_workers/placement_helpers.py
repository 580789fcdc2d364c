"""Inputs of the placement tests: this GPU's residency as a plain value, a
handler registry whose handlers declare models, and raw queue reads/writes
as another BullMQ client makes them."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio as aredis

from gpu_workers.handlers import HandlerRegistry
from gpu_workers.models import Model, ModelRegistry, from_data
from queues import Queue

GPU, OTHER = "GPU-here", "GPU-there"


@dataclass
class View:
    """This GPU's residency as placement sees it (an input, not a mock)."""

    here: frozenset[str] = frozenset()
    room: frozenset[str] = frozenset()
    backoff: frozenset[str] = frozenset()
    want: frozenset[str] = frozenset()
    load_s: dict[str, float] = field(default_factory=dict)

    def resident(self) -> frozenset[str]:
        return self.here

    def loadable_without_eviction(self, model: str) -> bool:
        return model in self.room

    def backing_off(self, model: str) -> bool:
        return model in self.backoff

    def wanted(self) -> frozenset[str]:
        return self.want

    def has_free_slot(self) -> bool:
        return True

    def expected_load_s(self, model: str) -> float:
        return self.load_s.get(model, 0.0)


def registry() -> HandlerRegistry:
    """Handlers: `m1`/`m2`/`m3` with that fixed model, `gen` naming its model
    in data["model"], `plain` without one."""
    models = ModelRegistry()
    for name in ("m1", "m2", "m3"):
        models.register(Model(name, lambda ctx: object()))
    handlers = HandlerRegistry(models)

    def noop(ctx: Any) -> None:
        return None

    for name in ("m1", "m2", "m3"):
        handlers.register(name, noop, model=name)
    handlers.register("gen", noop, model=from_data("model"))
    handlers.register("plain", noop)
    return handlers


class Recorder:
    """model_for, recording the data each job's model was worked out from."""

    def __init__(self) -> None:
        self.handlers = registry()
        self.seen: list[tuple[str, Any]] = []

    def __call__(self, name: str, data: Any) -> str | None:
        self.seen.append((name, data))
        return self.handlers.model_for(name, data)


def wait_ids(r: redis.Redis, q: Queue) -> list[str]:
    """The wait list in claim order (the next job first)."""
    return [str(x) for x in r.lrange(q.keys.wait, 0, -1)][::-1]


def node_style_job(r: redis.Redis, q: Queue, job_id: str, name: str, data: str) -> None:
    """A job as another BullMQ client (Node's addStandardJob) stores it."""
    now = int(time.time() * 1000)
    r.hset(
        q.keys.job(job_id),
        mapping={
            "name": name,
            "data": data,
            "opts": json.dumps({"attempts": 1}),
            "timestamp": str(now),
            "delay": "0",
            "priority": "0",
        },
    )
    r.lpush(q.keys.wait, job_id)
    r.zadd(q.keys.marker, {"0": 0})


async def client_for(redis_url: str) -> Any:
    """An asyncio client answering text, as a worker's `_bp`."""
    return aredis.Redis.from_url(redis_url, decode_responses=True)
