"""The fleet snapshot (gpu_workers/fleet_snapshot.py): one read of every
live record, GPUs joined with their workers, and the aggregates pages and
/metrics show, over records published through heartbeat.py."""

from __future__ import annotations

import json
import threading
import time

import redis

from gpu_workers.fleet import Fleet
from gpu_workers.fleet_cache import SnapshotCache
from gpu_workers.fleet_snapshot import read_snapshot
from gpu_workers.heartbeat import queue_record, queue_vouch
from gpu_workers.keys import BullpenKeys
from tests.gpu_workers.fleet_records import (
    GiB,
    gpu_uuid,
    host_name,
    publish_fleet,
    worker_id,
    worker_record,
)


def test_aggregates_of_a_published_fleet(r: redis.Redis, fleet: Fleet) -> None:
    """4 hosts x 8 GPUs: odd GPUs busy, GPU 0 of host 3 with a failed worker;
    the summary, per host, per queue, per model and Running counts add up,
    and the OOM counter of a GPU is its."""
    publish_fleet(r, 4)
    r.hset(BullpenKeys().gpu_counters(gpu_uuid(1, 2)), "oom_total", 3)
    snap = fleet.snapshot()
    s = snap.summary
    assert (s["gpus"], s["hosts"], s["workers"]) == (32, 4, 32)
    assert (s["busy"], s["idle"], s["down"], s["unused"]) == (16, 15, 1, 0)
    assert s["failed_workers"] == 1 and s["running_jobs"] == 16
    assert s["total_bytes"] == 32 * 80 * GiB and s["oom_total"] == 3
    assert s["committed_bytes"] == 16 * 4 * GiB
    assert snap.per_host[host_name(3)] == {
        "busy": 4,
        "idle": 3,
        "down": 1,
        "unused": 0,
        "gpus": 8,
    }
    # Queues dealt round-robin: gpu0 on even GPUs (host 3's GPU 0 failed).
    assert snap.per_queue["bull:gpu0"]["workers"] == 15
    assert snap.per_queue["bull:gpu0"]["failed"] == 1
    assert snap.per_queue["bull:gpu0"]["slots"] == 30
    assert snap.per_queue["bull:gpu1"]["running_jobs"] == 16
    assert snap.per_model == {"sdxl": 16, "llama": 16}
    assert snap.running[f"{host_name(3)}/bull:gpu0"] == 3
    assert snap.running[f"{host_name(0)}/bull:gpu0"] == 4
    i = next(n for n, g in enumerate(snap.gpus) if g["uuid"] == gpu_uuid(2, 1))
    assert snap.gpu_state[i] == "busy" and snap.gpu_queues[i] == ["bull:gpu1"]
    # Percentages in the grid's colour steps (10 %), halves up: used 38 %,
    # committed 5 %.
    assert snap.cell(i) == [host_name(2), 1, gpu_uuid(2, 1), "busy", 90, 40, 10]
    assert fleet.list_gpus() == fleet.snapshot().gpus


def test_cell_percentages_round_to_the_colour_step_halves_up() -> None:
    """As the grid's Math.round(v / 10) colours them, clamped to 0..100: a
    reading that moves within a step leaves the cell (what a live diff
    compares) as it was."""
    from gpu_workers.fleet_snapshot import _step

    assert [_step(p) for p in (0, 4.9, 5, 14.9, 91, 94.9, 95, 100, 130, -3)] == [
        0,
        0,
        10,
        10,
        90,
        90,
        100,
        100,
        100,
        0,
    ]


def test_odd_records_are_skipped_never_raised(r: redis.Redis, fleet: Fleet) -> None:
    """A record that is not a JSON object, a GPU without a uuid, limits that
    are not objects: skipped, the rest of the fleet read."""
    publish_fleet(r, 1)
    keys = BullpenKeys()
    later = int(time.time() * 1000) + 60_000
    r.set(keys.worker("bad1"), "{not json")
    r.set(keys.worker("bad2"), "[1, 2]")
    r.zadd(keys.workers, {"bad1": later, "bad2": later})
    r.set(keys.host("odd"), '{"host": "odd", "gpus": [{"index": 0}, "x"], "queues": 7}')
    r.zadd(keys.hosts, {"odd": later})
    snap = fleet.snapshot()
    assert snap.summary["gpus"] == 8 and snap.summary["hosts"] == 2
    assert snap.summary["workers"] == 8
    assert snap.gpus_by_host.get("odd") is None


def test_read_is_three_round_trips_whatever_the_size(
    r: redis.Redis, redis_url: str
) -> None:
    """The live indexes, the records (MGETs of 1,000 keys on one node), the
    OOM counters: three pipelines (round trips do not grow with the fleet)."""
    publish_fleet(r, 16)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    sent: list[int] = []
    real = client.pipeline

    def counting(*args: object, **kwargs: object) -> object:
        pipe = real(*args, **kwargs)  # type: ignore[arg-type]
        execute = pipe.execute

        def run(*a: object, **k: object) -> object:
            sent.append(len(pipe.command_stack))
            return execute(*a, **k)  # type: ignore[arg-type]

        pipe.execute = run  # type: ignore[method-assign]
        return pipe

    client.pipeline = counting  # type: ignore[method-assign]
    snap = read_snapshot(client, BullpenKeys())
    assert sent == [2, 1, 128]
    assert snap.summary["gpus"] == 128
    client.close()


def test_cache_serves_a_bounded_age_and_reads_in_the_background(
    r: redis.Redis, fleet: Fleet
) -> None:
    """Within max_age: the same snapshot, no read. Older: the held one at
    once while one background read fetches the next. max_age 0: every call
    reads."""
    publish_fleet(r, 1)
    gate = threading.Event()
    calls: list[int] = []

    def read():  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) > 1:
            gate.wait(5)
        return fleet.snapshot()

    cache = SnapshotCache(read, max_age_s=0.2)
    first = cache.get()
    assert cache.get() is first and len(calls) == 1
    time.sleep(0.3)
    publish_fleet(r, 2)
    t0 = time.monotonic()
    assert cache.get() is first  # stale, served while the next is read
    assert cache.get() is first and time.monotonic() - t0 < 1
    gate.set()
    deadline = time.monotonic() + 5
    while cache.get() is first and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cache.get().summary["hosts"] == 2 and len(calls) == 2
    never = SnapshotCache(fleet.snapshot, max_age_s=0)
    never.get()
    never.get()
    assert never.reads == 2
    assert worker_id(0, 1) in {w["id"] for w in first.workers}


def test_cache_raises_once_a_read_failed_rather_than_serve_stale(
    r: redis.Redis, fleet: Fleet
) -> None:
    """Redis gone: the stale snapshot is served while the background read
    tries; once that read failed, the next call raises its error, and the
    call after Redis answers again reads afresh."""
    publish_fleet(r, 1)
    down = threading.Event()

    def read():  # type: ignore[no-untyped-def]
        if down.is_set():
            raise redis.ConnectionError("refused")
        return fleet.snapshot()

    cache = SnapshotCache(read, max_age_s=0.1)
    first = cache.get()
    down.set()
    time.sleep(0.2)
    assert cache.get() is first  # stale, while the background read fails
    deadline = time.monotonic() + 5
    while cache._refreshing and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        cache.get()
        raise AssertionError("served a stale snapshot after a failed read")
    except redis.ConnectionError:
        pass
    down.clear()
    assert cache.get() is not first


def test_last_seen_comes_from_the_vouched_index_entry(
    r: redis.Redis, fleet: Fleet
) -> None:
    """A quiet worker's record is rewritten once a minute (its ts_ms then
    old) while its supervisor vouches for it every beat: when it was last
    seen is its index entry's expiry less its record's TTL, in the snapshot
    and in list_workers; a record without ttl_s (an older writer) keeps ts_ms."""
    keys = BullpenKeys()
    now = int(time.time() * 1000)
    written = worker_record(0, 0) | {"ts_ms": now - 50_000}
    pipe = r.pipeline(transaction=False)
    queue_record(pipe, keys, "worker", worker_id(0, 0), written, 10)
    queue_vouch(pipe, keys, "worker", {worker_id(0, 0): now + 10_000})
    pipe.execute()
    [w] = fleet.snapshot().workers
    assert w["ts_ms"] == now - 50_000 and w["seen_ms"] == now
    assert [x["seen_ms"] for x in fleet.list_workers()] == [now]
    old = worker_record(0, 1) | {"ts_ms": now - 3_000}
    r.set(keys.worker(worker_id(0, 1)), json.dumps(old))
    r.zadd(keys.workers, {worker_id(0, 1): now + 10_000})
    seen = {x["id"]: x["seen_ms"] for x in fleet.snapshot().workers}
    assert seen == {worker_id(0, 0): now, worker_id(0, 1): now - 3_000}
