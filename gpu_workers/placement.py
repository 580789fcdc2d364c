"""Claim-time placement: a GPU worker prefers the waiting jobs whose model is
resident on its GPU, leaves to another GPU a job whose model is open there
(resident with a free slot), and takes a cold job when loading it here is
cheap or it has waited long enough; no job waits past an age bound.

Before each claim (queues.worker.ClaimGate) `Placement.before_claim` peeks
at the first `scan` jobs of the queue's wait list in claim order
(`lua/peek_wait.lua`: ids, names, timestamps, data up to `DATA_CAP_BYTES`),
works out each one's model (`HandlerRegistry.model_for`), reads for the
models it needs whether they are open on another GPU (the
`bullpen:models:open:{model}` zsets, one pipeline), and `choose`s. A chosen
job that is not at the head is moved there (`lua/front_of_wait.lua`: LREM +
RPUSH in one script, only if still waiting); then the worker's ordinary
BullMQ claim runs. The queue's layout stays BullMQ's: jobs only change places
inside `wait`. Prioritized jobs (not in `wait`) and paused queues get the
plain claim. Rules per candidate, in claim order (`choose`):

    no model -> take; resident or loading here -> take; waited >= age bound
    -> take; load backing off here -> skip; open on another GPU -> skip;
    wanted here (warm pool, pins) -> take; loadable without evicting ->
    take; waited >= cold hold -> take; else skip.

No candidate taken: hold (claim nothing) until the earliest candidate's
next threshold, 50 ms..1 s, and re-add the queue's base marker (BullMQ's
`ZADD marker 0 "0"`): this worker's blocking wait may have taken it, and the
GPU the jobs suit may be idle, blocked on it.

Placement never takes a worker down: any error deciding logs and answers 0
(the plain claim). `publish` / `withdraw` keep this GPU's members of the warm
and open zsets (docs/protocol.md §6.1).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline

from queues.keys import QueueKeys

from .clock import now_ms
from .keys import BullpenKeys
from .placement_rules import (
    HOLD_MAX_S,
    HOLD_MIN_S,
    OPEN,
    WARM,
    Candidate,
    Choice,
    LocalView,
    ModelFor,
    candidate,
    choose,
    models_to_ask,
)
from .scripts import LUA

__all__ = [
    "DATA_CAP_BYTES",
    "HOLD_MAX_S",
    "HOLD_MIN_S",
    "OPEN",
    "WARM",
    "Candidate",
    "Choice",
    "LocalView",
    "Placement",
    "choose",
]

log = logging.getLogger("gpu_workers.placement")


#: A job's data longer than this is not read (its model is then what its
#: handler names without data).
DATA_CAP_BYTES = 64 * 1024
#: Tries when the job chosen was claimed by another worker before fronting.
FRONT_TRIES = 3
#: The most jobs one peek may look at.
SCAN_MAX = 1000


@dataclass
class PlacementStats:
    """Counts since start (what placement costs and decides)."""

    decisions: int = 0
    peeks: int = 0
    open_reads: int = 0
    fronts: int = 0
    front_misses: int = 0
    holds: int = 0
    errors: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


def _where(found: dict[str, str], model: str) -> str:
    """Where else `model` is, from Placement.elsewhere's answer."""
    return found.get(model, "")


class Placement:
    """Claim-time placement for one GPU worker (a ClaimGate's before_claim),
    and its GPU's members of the warm and open zsets."""

    def __init__(
        self,
        client: Any,
        queue_keys: QueueKeys,
        bkeys: BullpenKeys,
        gpu_uuid: str,
        view: LocalView,
        model_for: ModelFor,
        age_bound_s: float,
        cold_hold_s: float,
        scan: int,
        queue_key: str = "",
    ) -> None:
        self.client = client
        #: Its member of the warm and open zsets: GPU and `prefix:queue`.
        self.queue_key = queue_key or queue_keys.base.rstrip(":")
        self.member = f"{gpu_uuid}|{self.queue_key}"
        self.keys = queue_keys
        self.bkeys = bkeys
        self.gpu_uuid = gpu_uuid
        self.view = view
        self.model_for = model_for
        self.age_bound_ms = int(age_bound_s * 1000)
        self.cold_hold_ms = int(cold_hold_s * 1000)
        self.scan = min(max(int(scan), 1), SCAN_MAX)
        self.stats = PlacementStats()
        #: Whether this queue's worker has a slot free (a process serving
        #: several queues: a free slot of the GPU may be another queue's).
        self.has_room: Callable[[], bool] = lambda: True
        #: The last decision (for logs and the heartbeat).
        self.last: Choice | None = None
        self._warm: frozenset[str] = frozenset()
        self._open: frozenset[str] = frozenset()
        #: Every model this GPU was published under (withdraw removes them all).
        self._ever: set[str] = set()

    # --- before each claim ------------------------------------------------------
    async def before_claim(self) -> float:
        """0: claim now (the job chosen is at the head); > 0: hold that long.
        Any error: logged, 0 (the plain claim)."""
        try:
            return await self._decide()
        except Exception as exc:  # noqa: BLE001 - placement only prefers
            self.stats.errors += 1
            log.warning("placement failed, claiming in BullMQ's order: %r", exc)
            return 0.0

    async def _decide(self) -> float:
        for _ in range(FRONT_TRIES):
            paused, candidates = await self.peek()
            if paused or not candidates:
                return 0.0
            now = now_ms()
            where = await self.elsewhere(
                models_to_ask(candidates, self.view, now, self.age_bound_ms), now
            )
            choice = choose(
                candidates,
                self.view,
                functools.partial(_where, where),
                now,
                self.age_bound_ms,
                self.cold_hold_ms,
            )
            self._count(choice)
            if choice.job_id is None:
                if choice.hold_s > 0:
                    self.stats.holds += 1
                    await self.client.zadd(self.keys.marker, {"0": 0})
                return choice.hold_s
            if choice.index == 0 or await self.front(choice.job_id):
                return 0.0
            self.stats.front_misses += 1
        return 0.0

    def _count(self, choice: Choice) -> None:
        self.last = choice
        self.stats.decisions += 1
        key = choice.reason.split(" (")[0] if choice.job_id else "hold"
        self.stats.reasons[key] = self.stats.reasons.get(key, 0) + 1
        log.debug("placement: %s -> %s", choice.job_id, choice.reason)

    async def peek(self) -> tuple[bool, list[Candidate]]:
        """Whether the queue is paused, and its first `scan` waiting jobs in
        claim order."""
        self.stats.peeks += 1
        script = LUA.script(self.client, "peek_wait")
        paused, _length, flat = await script(
            keys=[self.keys.wait, self.keys.meta],
            args=[self.keys.base, self.scan, DATA_CAP_BYTES],
        )
        found = [
            candidate(flat[i : i + 5], self.model_for)
            for i in range(0, len(flat) - 4, 5)
        ]
        return bool(int(paused)), found

    async def elsewhere(self, models: Iterable[str], now: int) -> dict[str, str]:
        """Of `models`, those resident on another GPU serving this queue now:
        OPEN (a free slot there) or WARM (busy). One pipeline of
        ZRANGEBYSCORE now +inf on their open and warm zsets."""
        asked = list(models)
        if not asked:
            return {}
        self.stats.open_reads += 1
        pipe = self.client.pipeline(transaction=False)
        for model in asked:
            pipe.zrangebyscore(self.bkeys.model_open(model), now, "+inf")
            pipe.zrangebyscore(self.bkeys.model_warm(model), now, "+inf")
        answers = await pipe.execute()
        found: dict[str, str] = {}
        for i, model in enumerate(asked):
            opened, warm = answers[2 * i], answers[2 * i + 1]
            if any(self._other_for_this_queue(m) for m in opened or ()):
                found[model] = OPEN
            elif any(self._other_for_this_queue(m) for m in warm or ()):
                found[model] = WARM
        return found

    def _other_for_this_queue(self, member: str) -> bool:
        """A member of another GPU serving this queue."""
        gpu, _, queue = member.partition("|")
        return gpu != self.gpu_uuid and queue == self.queue_key

    async def front(self, job_id: str) -> bool:
        """Move a waiting job to the head of wait; False if no longer waiting."""
        self.stats.fronts += 1
        script = LUA.script(self.client, "front_of_wait")
        return bool(int(await script(keys=[self.keys.wait], args=[job_id])))

    # --- this GPU in the warm and open zsets --------------------------------------
    async def publish(
        self,
        target: Any,
        resident: Iterable[str],
        open_models: Iterable[str],
        ttl_s: float,
    ) -> None:
        """Put this GPU in the warm zset of each `resident` model and the open
        zset of each `open_models` one (only resident ones count), expiring
        `ttl_s` from now, and out of those it left since the last publish.
        `target`: a pipeline (the caller executes it) or a client."""
        warm = frozenset(resident)
        opened = frozenset(open_models) & warm
        now = now_ms()
        expiry = now + int(ttl_s * 1000)
        own = not isinstance(target, Pipeline | ClusterPipeline)
        pipe = target.pipeline(transaction=False) if own else target
        for zset, now_in, was_in in (
            (self.bkeys.model_warm, warm, self._warm),
            (self.bkeys.model_open, opened, self._open),
        ):
            for model in sorted(now_in):
                pipe.zadd(zset(model), {self.member: expiry})
                # Members of GPUs gone silent are dropped by whoever writes.
                pipe.zremrangebyscore(zset(model), "-inf", f"({now}")
            for model in sorted(was_in - now_in):
                pipe.zrem(zset(model), self.member)
        self._ever |= warm
        if own:
            await pipe.execute()
        self._warm, self._open = warm, opened

    async def withdraw(self) -> bool:
        """Take this GPU out of every zset it was published in (the worker
        stops); False (logged) when Redis failed: the members expire anyway."""
        pipe = self.client.pipeline(transaction=False)
        for model in sorted(self._ever):
            pipe.zrem(self.bkeys.model_warm(model), self.member)
            pipe.zrem(self.bkeys.model_open(model), self.member)
        try:
            if self._ever:
                await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - shutting down; they expire
            log.warning("placement: could not withdraw GPU %s: %r", self.gpu_uuid, exc)
            return False
        self._warm = self._open = frozenset()
        self._ever.clear()
        return True
