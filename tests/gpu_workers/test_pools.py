"""Warm pools (gpu_workers/pools.py, poolplan.py): the pure plan, the backlog
sample and the planner on a real Redis with real BullMQ queues, its clock
synthetic (ticks of POOL_TICK_S), the workers' heartbeats published."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from gpu_workers import defaults
from gpu_workers.config import QueueConfig, SupervisorConfig
from gpu_workers.envconfig import env_values
from gpu_workers.handlers import REGISTRY, HandlerRegistry
from gpu_workers.heartbeat import queue_heartbeat, queue_removal
from gpu_workers.keys import BullpenKeys
from gpu_workers.models import ModelRegistry, from_data, sim_model
from gpu_workers.pools import (
    GpuState,
    GpuView,
    Hysteresis,
    PoolPlanner,
    plan,
    pool_planner,
    sample_backlog,
)
from gpu_workers.settings import on_off
from queues import Queue, codec

GIB = 1 << 30
TICK = defaults.POOL_TICK_S
KEYS = BullpenKeys()


def views(n: int, models: str = "ab", budget: int = 40 * GIB) -> dict[str, GpuView]:
    return {f"GPU-{i}": GpuView(budget, frozenset(models)) for i in range(n)}


def counts(out: dict[str, Any]) -> Counter[str]:
    return Counter(m for a in out.values() for m in a.planned)


# --- the plan ----------------------------------------------------------------------
def test_a_bigger_backlog_gets_more_gpus_and_every_backlog_one() -> None:
    out, _ = plan(views(4), {"a": 500, "b": 5}, {}, {}, {}, {}, 0.0)
    assert counts(out) == {"a": 3, "b": 1}
    out, _ = plan(views(4), {"a": 5, "b": 500}, {}, {}, {}, {}, 0.0)
    assert counts(out) == {"a": 1, "b": 3}
    # Demand is backlog x mean job seconds: 50 jobs of 60 s outweigh 500 of 1 s.
    out, _ = plan(views(4), {"a": 500, "b": 50}, {"b": 60.0}, {}, {}, {}, 0.0)
    assert counts(out) == {"a": 1, "b": 3}


def test_the_plan_is_deterministic_and_respects_what_fits() -> None:
    gpus = views(3) | {"GPU-small": GpuView(8 * GIB, frozenset("b"))}
    first = plan(gpus, {"a": 900, "b": 100}, {}, {}, {}, {}, 0.0)
    again = plan(
        dict(reversed(gpus.items())), {"b": 100, "a": 900}, {}, {}, {}, {}, 0.0
    )
    assert first == again
    assert first[0]["GPU-small"].planned == ("b",)  # a does not fit there
    assert counts(first[0]) == {"a": 3, "b": 1}


def test_pins_are_kept_whatever_the_backlog() -> None:
    pins = {"GPU-0": ("b",), "GPU-1": ("a", "b")}
    current = {f"GPU-{i}": ("a",) for i in range(4)}
    state = {g: GpuState(since=0.0) for g in current}
    out, state = plan(views(4), {"a": 500}, {}, current, pins, state, 1.0)
    assert out["GPU-0"].models == ("b",) and out["GPU-1"].models == ("a", "b")
    assert out["GPU-0"].why == "pinned by an operator"
    assert out["GPU-2"].models == out["GPU-3"].models == ("a",)


def test_a_model_without_backlog_loses_gpus_only_after_hold_and_dwell() -> None:
    # Assigned at t=0: the dwell (60 s) outlasts the hold (3 ticks and 30 s).
    assert run_until_moved({g: GpuState(since=0.0) for g in HOLDING_B}) == (
        defaults.POOL_MIN_DWELL_S
    )
    # Assigned long ago: the hold alone, from the first tick wanting the change.
    assert run_until_moved({g: GpuState() for g in HOLDING_B}) == TICK + max(
        (defaults.POOL_HOLD_TICKS - 1) * TICK, defaults.POOL_HOLD_S
    )


HOLDING_B = {f"GPU-{i}": ("b",) for i in range(4)}


def run_until_moved(state: dict[str, GpuState]) -> float:
    """Ticks (from t=10) a backlog of only `a` over GPUs holding `b`: when
    they move (all at once: nothing else waits)."""
    now = TICK
    while now < 1000:
        out, state = plan(views(4), {"a": 500}, {}, HOLDING_B, {}, state, now)
        if counts(out) != {"b": 4}:
            assert counts(out) == {"a": 4}
            return now
        assert out["GPU-0"].why.startswith("holding b: the plan wants a")
        now += TICK
    raise AssertionError("never moved")


def test_a_shift_inside_the_dead_band_moves_nothing() -> None:
    current: dict[str, tuple[str, ...]] = {
        "GPU-0": ("a",),
        "GPU-1": ("a",),
        "GPU-2": ("b",),
        "GPU-3": ("b",),
    }
    state: dict[str, GpuState] = {}
    for tick in range(30):  # a's share 2.8 GPUs: within 1 GPU of its 2
        out, state = plan(
            views(4), {"a": 350, "b": 150}, {}, current, {}, state, tick * TICK
        )
        assert {g: a.planned for g, a in out.items()} == current
    state = {}
    for tick in range(30):  # a's share 3.6: moved past the band
        out, state = plan(
            views(4), {"a": 450, "b": 50}, {}, current, {}, state, tick * TICK
        )
        current = {g: a.planned for g, a in out.items()}
    assert counts(out) == {"a": 3, "b": 1}


# --- the backlog sample ------------------------------------------------------------
@pytest.fixture
def registry() -> HandlerRegistry:
    """Handlers whose jobs name their model in their data, models a and b."""
    models = ModelRegistry()
    for name in ("a", "b"):
        sim_model(name, "4GiB", 0.0, registry=models)
    handlers = HandlerRegistry(models)
    handlers.register("gen", lambda ctx: None, "1GiB", from_data("model"))
    handlers.register("plain", lambda ctx: None, "1GiB")
    return handlers


def test_the_backlog_sample_scales_the_sample_to_the_lists(
    r: redis.Redis, q: Queue, registry: HandlerRegistry
) -> None:
    r.lpush(f"bull:{q.name}:wait", "ghost")  # an id whose job is gone
    q.add("plain", {"model": "a"})  # its handler declares no model
    q.add("gen", {"model": "nope"})  # not a declared model
    q.add("gen", {"model": "a", "pad": "x" * (defaults.POOL_DATA_MAX_BYTES + 1)})
    odd = q.add("gen", {"model": "a"})
    r.hset(f"bull:{q.name}:{odd.id}", "data", "{not json")
    q.add_bulk(
        {"name": "gen", "data": {"model": "b" if i % 4 == 0 else "a"}}
        for i in range(400)
    )
    q.add("gen", {"model": "b"}, priority=3)
    refs = [("bull", q.name), ("bull", "nothing-here")]
    backlog = sample_backlog(r, refs, registry.model_for, sample=200)
    # The oldest 200 of 405 ids: the ghost, 4 jobs of no model, then 195 of
    # the 400 (49 b, 146 a); 199 jobs read, scaled by 405/199. Prioritized: b.
    scale = 405 / 199
    assert backlog == pytest.approx({"a": 146 * scale, "b": 49 * scale + 1})
    q.pause()
    assert sample_backlog(r, refs, registry.model_for) == {}


# --- the planner on Redis ----------------------------------------------------------
class Fleet4:
    """Four live GPUs, one worker record each, over two queues of models a and
    b (500 waiting each) and a queue with a few of each that never pauses."""

    def __init__(self, r: redis.Redis, registry: HandlerRegistry) -> None:
        self.r = r
        self.queues = {n: Queue(n, r) for n in ("qa", "qb", "qsmall")}
        for name, model, n in (("qa", "a", 500), ("qb", "b", 500)):
            self.queues[name].add_bulk(
                {"name": "gen", "data": {"model": model}} for _ in range(n)
            )
        for model in "ab" * 5:
            self.queues["qsmall"].add("gen", {"model": model})
        self.gpus = [f"GPU-{i}" for i in range(4)]
        for uuid in self.gpus:
            self.publish(uuid)
        # Tolerated: a failed worker's record, odd "models" entries.
        self.publish("GPU-dead", state="failed")
        self.publish("GPU-2", models=[{"name": "b", "state": "resident"}, "x", {}])
        self.publish("GPU-1", models=5, gpu_note="x")
        config = SupervisorConfig(
            "redis://unused", [QueueConfig(n) for n in self.queues], host="h1"
        )
        self.planner = PoolPlanner(r, KEYS, config, registry.model_for)

    def publish(self, uuid: str, state: str = "idle", **extra: Any) -> None:
        pipe = self.r.pipeline(transaction=False)
        for name in self.queues:
            record = {
                "id": f"h1:bull:{name}:{uuid}",
                "host": "h1",
                "queue": name,
                "prefix": "bull",
                "gpu": {"uuid": uuid},
                "state": state,
                "budget_bytes": 20 * GIB,
                **extra,
            }
            queue_heartbeat(pipe, KEYS, "worker", record["id"], record, 3600)
        pipe.execute()

    def favour(self, model: str) -> None:
        """Only `model`'s big queue counts (the other is paused)."""
        big, other = ("qa", "qb") if model == "a" else ("qb", "qa")
        self.queues[other].pause()
        self.queues[big].resume()

    def pool(self) -> dict[str, dict[str, Any]]:
        raw: dict[str, str] = self.r.hgetall(KEYS.model_pool())  # type: ignore[assignment]
        return {g: codec.loads(v) for g, v in raw.items()}

    def gpus_of(self) -> Counter[str]:
        return Counter(m for rec in self.pool().values() for m in rec["models"])

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()


@pytest.fixture
def fleet4(r: redis.Redis, registry: HandlerRegistry) -> Iterator[Fleet4]:
    f = Fleet4(r, registry)
    yield f
    f.close()


def test_gpus_follow_a_backlog_that_shifts_within_a_bounded_time(
    fleet4: Fleet4,
) -> None:
    fleet4.favour("a")
    fleet4.planner.tick(0.0)
    assert fleet4.gpus_of() == {"a": 3, "b": 1}
    assert set(fleet4.pool()) == set(fleet4.gpus)  # the failed record's GPU is not
    fleet4.favour("b")
    now, history = 0.0, []
    while fleet4.gpus_of() != {"a": 1, "b": 3}:
        now += TICK
        assert now <= defaults.POOL_MIN_DWELL_S + defaults.POOL_HOLD_S + TICK
        fleet4.planner.tick(now)
        history.append(fleet4.gpus_of())
    # Nothing moved before the hold: the change waited out its ticks.
    assert now >= max(defaults.POOL_HOLD_TICKS * TICK, defaults.POOL_MIN_DWELL_S)
    assert all(h == {"a": 3, "b": 1} for h in history[:-1])
    moved = [rec for rec in fleet4.pool().values() if rec["models"] == ["b"]]
    assert any(rec["why"].startswith("moved from a") for rec in moved)
    assert all(rec["ts_ms"] == int(now * 1000) for rec in fleet4.pool().values())


def test_a_flickering_backlog_moves_nothing(fleet4: Fleet4) -> None:
    fleet4.favour("a")
    fleet4.planner.tick(0.0)
    first = fleet4.pool()
    for tick in range(1, 100):  # 1000 s of a backlog flipping every tick
        fleet4.favour("b" if tick % 2 else "a")
        fleet4.planner.tick(tick * TICK)
        assert {g: rec["models"] for g, rec in fleet4.pool().items()} == {
            g: rec["models"] for g, rec in first.items()
        }
    # Without the hysteresis the same flicker moves GPUs every tick.
    fleet4.planner.rules = Hysteresis(hold_ticks=1, hold_s=0.0, min_dwell_s=0.0)
    seen = []
    for tick in range(101, 105):
        fleet4.favour("b" if tick % 2 else "a")
        fleet4.planner.tick(tick * TICK)
        seen.append(fleet4.gpus_of())
    assert seen == [{"a": 1, "b": 3}, {"a": 3, "b": 1}] * 2


def test_pins_gone_gpus_and_a_second_planner(fleet4: Fleet4, r: redis.Redis) -> None:
    fleet4.favour("a")
    r.hset(KEYS.model_pins(), "GPU-0", codec.dumps(["b", "b", "../bad", 7]))
    r.hset(KEYS.model_pins(), "GPU-1", "{not json")
    fleet4.planner.tick(0.0)
    pool = fleet4.pool()
    assert pool["GPU-0"]["models"] == ["b"]
    assert pool["GPU-1"]["models"] == ["a"]
    pipe = r.pipeline(transaction=False)
    for name in fleet4.queues:
        queue_removal(pipe, KEYS, "worker", f"h1:bull:{name}:GPU-3")
    pipe.execute()
    other = PoolPlanner(r, KEYS, fleet4.planner.config, fleet4.planner.model_for)
    assert other.tick(TICK) is None  # the first one holds the lock
    fleet4.planner.tick(TICK)
    assert set(fleet4.pool()) == {"GPU-0", "GPU-1", "GPU-2"}
    r.delete(KEYS.model_planner())  # the first one died: the other takes over
    assert other.tick(2 * TICK) is not None
    assert fleet4.pool()["GPU-0"]["models"] == ["b"]


def test_an_idle_fleet_is_planned_less_often_and_a_backlog_brings_it_back(
    fleet4: Fleet4,
) -> None:
    """Nothing waiting and no pool changing: the next tick comes after
    POOL_IDLE_TICK_S, still rewriting every record well before a worker
    would call it stale; a backlog brings back POOL_TICK_S."""
    idle = defaults.POOL_IDLE_TICK_S
    assert TICK < idle < defaults.POOL_STALE_S
    for queue in fleet4.queues.values():
        queue.pause()  # nothing counts as waiting
    planner = fleet4.planner
    planner.tick_quietly(0.0)  # the first tick announces every GPU's pool
    assert not planner.quiet
    planner.tick_quietly(TICK)
    assert planner.quiet
    written = fleet4.pool()
    planner.tick_quietly(2 * TICK)  # not due at the idle cadence
    assert fleet4.pool() == written
    planner.tick_quietly(TICK + idle)
    assert {rec["ts_ms"] for rec in fleet4.pool().values()} == {
        int((TICK + idle) * 1000)
    }
    fleet4.favour("a")
    planner.tick_quietly(TICK + 2 * idle)
    assert not planner.quiet and fleet4.gpus_of()["a"] >= 1
    planner.tick_quietly(2 * TICK + 2 * idle)  # due again after POOL_TICK_S
    assert {rec["ts_ms"] for rec in fleet4.pool().values()} == {
        int((2 * TICK + 2 * idle) * 1000)
    }


def test_tick_quietly_survives_redis_going_away(
    registry: HandlerRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    client = redis.Redis(port=1, decode_responses=True, socket_connect_timeout=0.2)
    config = SupervisorConfig("redis://unused", [QueueConfig("q")], host="h1")
    planner = PoolPlanner(client, KEYS, config, registry.model_for)
    planner.tick_quietly(0.0)  # logs, does not raise
    planner.tick_quietly(1.0)  # not due yet: no second attempt
    failed = [r for r in caplog.records if "warm pools failed" in r.getMessage()]
    assert len(failed) == 1


# --- the setting -------------------------------------------------------------------
def test_model_pools_setting_parses_and_turns_the_planner_off(r: redis.Redis) -> None:
    assert on_off("on") is True and on_off("OFF") is False
    with pytest.raises(ValueError):
        on_off("maybe")
    assert env_values({"BULLPEN_MODEL_POOLS": "off"}) == {"model_pools": False}
    off = SupervisorConfig("redis://unused", [QueueConfig("q")], model_pools=False)
    assert pool_planner(r, KEYS, off) is None
    # On: nothing to plan unless a handler declares a model.
    on = SupervisorConfig(
        "redis://unused",
        [QueueConfig("q")],
        handler_modules=["gpu_workers.demo_handlers"],
    )
    assert (pool_planner(r, KEYS, on) is None) == (not REGISTRY.uses_models())
    broken = SupervisorConfig(
        "redis://unused", [QueueConfig("q")], handler_modules=["no.such.module"]
    )
    assert pool_planner(r, KEYS, broken) is None
