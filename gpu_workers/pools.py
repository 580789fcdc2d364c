"""Warm pools: which model each GPU keeps resident, from the backlog.

Every POOL_TICK_S (POOL_IDLE_TICK_S while nothing waits and no pool
changes) the supervisor holding `bullpen:models:planner` samples
the waiting jobs of every served queue (`sample_backlog`), weighs each
model's backlog by its mean job seconds, shares the live GPUs among the
models in proportion (`plan`) and writes `bullpen:models:pool`: GPU uuid ->
{"models", "ts_ms", "why", "since_ms"}. Workers preload their GPU's pool
when idle and placement prefers it (the lead's residency.py/placement.py).

The plan (poolplan.py) is damped so nothing thrashes; operators' pins
(`bullpen:models:pins`) are kept on their GPUs whatever the backlog. Only
one supervisor plans at a time; the others' ticks cost one SET.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

from queues import codec
from queues.keys import QueueKeys, names_queue_key

from . import defaults
from .config import SupervisorConfig, check_safe_queue_name, check_segment_name
from .control import announce_models
from .exceptions import ConfigError
from .fleet import Fleet
from .handlers import REGISTRY, load_handler_modules
from .keys import BullpenKeys
from .models import MODEL_NAME, MODELS
from .poolplan import Assignment, GpuState, GpuView, Hysteresis, plan

__all__ = [
    "Assignment",
    "GpuState",
    "GpuView",
    "Hysteresis",
    "PoolPlanner",
    "plan",
    "pool_planner",
    "sample_backlog",
    "sample_queues",
]

log = logging.getLogger("gpu_workers.pools")

#: (job name, job data) -> the job's model or None, never raising.
ModelFor = Callable[[str, Any], "str | None"]
_UUID = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")


# --- the backlog ------------------------------------------------------------------
def sample_backlog(
    client: Any,
    queues: Iterable[tuple[str, str]],
    model_for: ModelFor,
    sample: int = defaults.POOL_BACKLOG_SAMPLE,
) -> dict[str, float]:
    """Per model, about how many jobs wait across `queues` ((prefix, name)
    pairs): the next `sample` jobs of each wait list and prioritized set are
    read, counted per model and scaled by the list's length."""
    total: dict[str, float] = {}
    for counts in sample_queues(client, queues, model_for, sample).values():
        for model, n in counts.items():
            total[model] = total.get(model, 0.0) + n
    return total


def sample_queues(
    client: Any,
    queues: Iterable[tuple[str, str]],
    model_for: ModelFor,
    sample: int = defaults.POOL_BACKLOG_SAMPLE,
) -> dict[tuple[str, str], dict[str, float]]:
    """`sample_backlog` per queue. A paused queue has none; a job whose data
    is over POOL_DATA_MAX_BYTES, or whose model cannot be told, has no model."""
    return {
        (p, q): _sample_queue(client, QueueKeys(q, p), model_for, sample)
        for p, q in queues
    }


def _sample_queue(
    client: Any, qk: QueueKeys, model_for: ModelFor, sample: int
) -> dict[str, float]:
    pipe = client.pipeline(transaction=False)
    pipe.hexists(qk.meta, "paused")
    pipe.llen(qk.wait)
    pipe.lrange(qk.wait, -sample, -1)  # workers pop from the tail
    pipe.zcard(qk.prioritized)
    pipe.zrange(qk.prioritized, 0, sample - 1)
    paused, wait_len, wait_ids, prio_len, prio_ids = pipe.execute()
    counts: dict[str, float] = {}
    if paused:
        return counts
    for length, ids in ((wait_len, wait_ids), (prio_len, prio_ids)):
        ids = [i for i in ids if isinstance(i, str) and not names_queue_key(i)]
        models = _job_models(client, qk, ids, model_for)
        read = len(models)
        for model in models:
            if model is not None:
                counts[model] = counts.get(model, 0.0) + max(length, read) / read
    return counts


def _job_models(
    client: Any, qk: QueueKeys, ids: list[str], model_for: ModelFor
) -> list[str | None]:
    """The model of each job still there (a vanished job is left out)."""
    if not ids:
        return []
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(qk.job(job_id), "name")
        pipe.hstrlen(qk.job(job_id), "data")
    replies = pipe.execute(raise_on_error=False)
    jobs = []
    for i, job_id in enumerate(ids):
        name, size = replies[2 * i], replies[2 * i + 1]
        if isinstance(name, str):
            small = isinstance(size, int) and size <= defaults.POOL_DATA_MAX_BYTES
            jobs.append((job_id, name, small))
    pipe = client.pipeline(transaction=False)
    for job_id, _, small in jobs:
        if small:
            pipe.hget(qk.job(job_id), "data")
    data = iter(pipe.execute(raise_on_error=False) if len(pipe) else [])
    return [
        _model(model_for, name, next(data)) if small else None
        for _, name, small in jobs
    ]


def _model(model_for: ModelFor, name: str, raw: Any) -> str | None:
    try:
        data = codec.loads(raw) if isinstance(raw, str) else None
    except (ValueError, TypeError, RecursionError):
        data = None
    try:
        model = model_for(name, data)
    except Exception:  # noqa: BLE001 - one odd job must not stop the planning
        return None
    return model if isinstance(model, str) and MODEL_NAME.fullmatch(model) else None


# --- the planner in a supervisor ---------------------------------------------------
#: Take the planner lock, or keep it when this planner holds it.
_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""


class PoolPlanner:
    """Plans the fleet's warm pools when it holds the planner lock."""

    def __init__(
        self,
        client: Any,
        keys: BullpenKeys,
        config: SupervisorConfig,
        model_for: ModelFor,
        weights_of: Callable[[str], int | None] = lambda m: None,
        rules: Hysteresis | None = None,
        tick_s: float = defaults.POOL_TICK_S,
        idle_tick_s: float = defaults.POOL_IDLE_TICK_S,
    ) -> None:
        self.client = client
        self.keys = keys
        self.config = config
        self.model_for = model_for
        self.weights_of = weights_of
        self.rules = rules or Hysteresis()
        self.tick_s = tick_s
        self.idle_tick_s = max(idle_tick_s, tick_s)
        #: The last tick planned, found nothing waiting and changed no pool.
        self.quiet = False
        self.ident = f"{config.host}:{os.getpid()}:{id(self):x}"
        self.state: dict[str, GpuState] = {}
        self.fleet = Fleet(client, keys.ns)
        self._lock = client.register_script(_LOCK)
        #: GPU uuid -> the models last announced as its pool.
        self._announced: dict[str, list[str]] = {}
        self._next = -math.inf
        self._every = tick_s

    def tick_quietly(self, now: float) -> None:
        """`tick(now)` once every `tick_s` (wall seconds; `idle_tick_s` after
        a quiet tick), logging instead of raising: the supervisor's loop
        must go on."""
        if self._next - self._every <= now < self._next:
            return
        try:
            self.tick(now)
        except Exception as exc:  # noqa: BLE001 - Redis away, read-only, odd data
            log.warning("planning the warm pools failed: %r", exc)
        self._every = self.idle_tick_s if self.quiet else self.tick_s
        self._next = now + self._every

    def tick(self, now: float) -> dict[str, Assignment] | None:
        """Plan and write the pools (None: another supervisor plans)."""
        ttl_ms = max(int(2 * self.idle_tick_s * 1000), 1000)
        self.quiet = False
        if not self._lock(keys=[self.keys.model_planner()], args=[self.ident, ttl_ms]):
            self.state.clear()  # whoever plans next starts from the record
            return None
        gpus_seen = self._gpus()
        queues = sorted(
            {(q.prefix, q.queue) for q in self.config.queues}
            | {ref for gpu in gpus_seen.values() for ref in gpu["queues"]}
        )
        per_queue = sample_queues(self.client, queues, self.model_for)
        backlog: dict[str, float] = {}
        for counts in per_queue.values():
            for m, n in counts.items():
                backlog[m] = backlog.get(m, 0.0) + n
        job_seconds, weights = self._stats()
        gpus = {}
        for uuid, seen in gpus_seen.items():
            fits = {
                m
                for ref in seen["queues"]
                for m in per_queue.get(ref, {})
                if (weights.get(m) or self.weights_of(m) or 0) <= seen["budget"]
            }
            gpus[uuid] = GpuView(seen["budget"], frozenset(fits), seen["resident"])
        pins = self._pins()
        current, recorded = self._current(pins, now)
        out, self.state = plan(
            gpus, backlog, job_seconds, current, pins, self.state, now, self.rules
        )
        changed = self._write(out, recorded, now)
        self.quiet = (
            not changed
            and not any(n > 0 for n in backlog.values())
            and not any(st.pending_ticks for st in self.state.values())
        )
        return out

    def _gpus(self) -> dict[str, dict[str, Any]]:
        """Live GPUs from the workers' heartbeats: budget, queues, residents."""
        gpus: dict[str, dict[str, Any]] = {}
        for w in self.fleet.list_workers():
            uuid = (
                (w.get("gpu") or {}).get("uuid")
                if isinstance(w.get("gpu"), dict)
                else None
            )
            if (
                w.get("state") == "failed"
                or not isinstance(uuid, str)
                or not _UUID.fullmatch(uuid)
            ):
                continue
            try:
                ref = (
                    check_segment_name(w.get("prefix"), "p", tag_ok=True),
                    check_safe_queue_name(w.get("queue")),
                )
            except ConfigError:
                continue
            gpu = gpus.setdefault(
                uuid, {"budget": 0, "queues": set(), "resident": set()}
            )
            budget = w.get("budget_bytes")
            if isinstance(budget, int) and not isinstance(budget, bool):
                gpu["budget"] = max(gpu["budget"], budget)
            gpu["queues"].add(ref)
            models = w.get("models")
            for entry in models if isinstance(models, list) else ():
                if (
                    isinstance(entry, dict)
                    and entry.get("state") in ("loading", "resident")
                    and isinstance(entry.get("name"), str)
                ):
                    gpu["resident"].add(entry["name"])
        for gpu in gpus.values():
            gpu["resident"] = frozenset(gpu["resident"])
        return gpus

    def _stats(self) -> tuple[dict[str, float], dict[str, int]]:
        """Mean job seconds and measured weights per model (stats hash)."""
        seconds: dict[str, float] = {}
        weights: dict[str, int] = {}
        for model, raw in self.client.hgetall(self.keys.model_stats()).items():
            rec = _json_dict(raw)
            jobs, total = rec.get("jobs"), rec.get("job_s_sum")
            if _number(jobs) and _number(total) and jobs >= 1 and total > 0:
                seconds[model] = min(total / jobs, 24 * 3600.0)
            nbytes = rec.get("weights_bytes")
            if isinstance(nbytes, int) and not isinstance(nbytes, bool) and nbytes > 0:
                weights[model] = nbytes
        return seconds, weights

    def _pins(self) -> dict[str, tuple[str, ...]]:
        pins = {}
        for uuid, raw in self.client.hgetall(self.keys.model_pins()).items():
            try:
                models = codec.loads(raw)
            except (ValueError, TypeError, RecursionError):
                continue
            if isinstance(models, list):
                good = [
                    m for m in models if isinstance(m, str) and MODEL_NAME.fullmatch(m)
                ]
                pins[uuid] = tuple(dict.fromkeys(good))[: defaults.POOL_MAX_PINS]
        return pins

    def _current(
        self, pins: Mapping[str, tuple[str, ...]], now: float
    ) -> tuple[dict[str, tuple[str, ...]], set[str]]:
        """The planned models of each GPU's pool record (pins apart), and
        every GPU with a record; a GPU this planner has no state for takes
        its dwell from the record."""
        current = {}
        records = self.client.hgetall(self.keys.model_pool())
        for uuid, raw in records.items():
            rec = _json_dict(raw)
            models = rec.get("models")
            if not isinstance(models, list):
                continue
            kept = pins.get(uuid, ())
            current[uuid] = tuple(
                m
                for m in models
                if isinstance(m, str) and MODEL_NAME.fullmatch(m) and m not in kept
            )
            since = rec.get("since_ms")
            if uuid not in self.state and _number(since):
                self.state[uuid] = GpuState(min(since / 1000.0, now))
        return current, set(records)

    def _write(
        self, out: Mapping[str, Assignment], recorded: set[str], now: float
    ) -> list[str]:
        """Write every GPU's pool record (fresh `ts_ms`), drop the records of
        GPUs gone; returns the GPUs whose pool changed (announced)."""
        key = self.keys.model_pool()
        gone = sorted(g for g in recorded if g not in out)
        ts_ms = int(now * 1000)
        records = {}
        for uuid, a in out.items():
            since = self.state[uuid].since
            records[uuid] = codec.dumps(
                {
                    "models": list(dict.fromkeys(a.models)),
                    "ts_ms": ts_ms,
                    "why": a.why,
                    "since_ms": int(since * 1000) if math.isfinite(since) else ts_ms,
                }
            )
        pipe = self.client.pipeline(transaction=False)
        if records:  # one HSET for every GPU, not one each: a tick a fleet
            pipe.hset(key, mapping=records)
        if gone:
            pipe.hdel(key, *gone)
        pipe.execute()
        models = {uuid: list(dict.fromkeys(a.models)) for uuid, a in out.items()}
        changed = sorted(
            set(gone) | {u for u, m in models.items() if self._announced.get(u) != m}
        )
        if changed:  # the workers re-read their pool at once (control.py)
            announce_models(self.client, self.keys, changed)
        self._announced = models
        return changed


def _number(value: Any) -> TypeGuard[int | float]:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def _json_dict(raw: Any) -> dict[str, Any]:
    try:
        value = codec.loads(raw)
    except (ValueError, TypeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def pool_planner(
    client: Any, keys: BullpenKeys, config: SupervisorConfig
) -> PoolPlanner | None:
    """The supervisor's planner: None when BULLPEN_MODEL_POOLS is off, the
    handler modules do not import, or no handler declares a model."""
    if not config.model_pools:
        return None
    try:
        load_handler_modules(config.handler_modules)
    except ConfigError as exc:
        log.error("warm pools off: %s", exc)
        return None
    if not REGISTRY.uses_models():
        return None

    def weights_of(name: str) -> int | None:
        return MODELS.get(name).weights if name in MODELS else None

    return PoolPlanner(client, keys, config, REGISTRY.model_for, weights_of)
