"""The fleet: heartbeat records with TTLs, Bullpen's own namespace, and
the read model's merging of hosts, GPUs and workers."""

from __future__ import annotations

import time

import redis

import gpu_workers.demo_handlers  # noqa: F401,E402 - registers `demo`
from gpu_workers.fleet import Fleet
from gpu_workers.heartbeat import queue_heartbeat, queue_removal
from gpu_workers.keys import BullpenKeys
from queues import Queue
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until
from tests.redis_server import RedisServer

GiB = 2**30


def beat(r: redis.Redis, kind: str, ident: str, record: dict, ttl_s: float) -> None:
    pipe = r.pipeline(transaction=False)
    queue_heartbeat(pipe, BullpenKeys(), kind, ident, record, ttl_s)
    pipe.execute()


def test_heartbeat_records_expire_on_their_own(r: redis.Redis, fleet: Fleet) -> None:
    """A record lives for its TTL after its last heartbeat; listings skip
    expired index entries, and the next heartbeat written to an index prunes
    them (reads never write)."""
    beat(r, "worker", "h:bull:q:G0", {"id": "h:bull:q:G0", "host": "h"}, 0.3)
    beat(r, "host", "h", {"host": "h", "gpus": []}, 0.3)
    assert [w["id"] for w in fleet.list_workers()] == ["h:bull:q:G0"]
    assert [h["host"] for h in fleet.list_hosts()] == ["h"]
    time.sleep(0.4)
    assert fleet.list_workers() == [] and fleet.list_hosts() == []
    assert r.zcard("bullpen:workers") == 1 and r.zcard("bullpen:hosts") == 1
    beat(r, "worker", "h2:bull:q:G0", {"id": "h2:bull:q:G0", "host": "h2"}, 5)
    beat(r, "host", "h2", {"host": "h2", "gpus": []}, 5)
    assert r.zrange("bullpen:workers", 0, -1) == ["h2:bull:q:G0"]
    assert r.zrange("bullpen:hosts", 0, -1) == ["h2"]


def test_reading_the_fleet_never_writes(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """A dashboard's reads (hosts, workers, GPUs, desired counts, a job's VRAM)
    run as a Redis user that may only read, expired entries included, and
    send no write command."""
    gpu = {"uuid": "SIM-a-0", "index": 0, "memory_total_bytes": 24 * GiB}
    beat(r, "worker", "a:bull:q:SIM-a-0", {"id": "a:bull:q:SIM-a-0"}, 0.1)
    beat(r, "host", "old", {"host": "old", "gpus": [gpu]}, 0.1)
    beat(r, "host", "a", {"host": "a", "gpus": [gpu]}, 5)
    r.hset("bullpen:desired:a", "bull:q", '{"workers":1}')
    r.hset("bullpen:job:bull:q:1", "declared_bytes", 5)
    time.sleep(0.2)
    r.acl_setuser(
        "reader",
        enabled=True,
        passwords=["+reader-pw"],
        keys=["*"],
        commands=["+@read", "+@connection", "-@write"],
    )
    r.config_resetstat()
    reader = Fleet(f"redis://reader:reader-pw@127.0.0.1:{redis_server.port}/0")
    try:
        assert [h["host"] for h in reader.list_hosts()] == ["a"]
        assert reader.list_workers() == []
        assert [g["host"] for g in reader.list_gpus()] == ["a"]
        assert reader.get_desired("a") == {"bull:q": {"workers": 1}}
        assert reader.job_vram("q", "1") == {"declared_bytes": 5}
    finally:
        reader.close()
        r.acl_deluser("reader")
    stats = r.info("commandstats")
    assert "cmdstat_zremrangebyscore" not in stats
    assert r.zcard("bullpen:workers") == 1 and r.zcard("bullpen:hosts") == 2


def test_removal_is_announced_on_the_stream(r: redis.Redis, fleet: Fleet) -> None:
    """A clean stop deletes the record and says so on the workers stream."""
    beat(r, "worker", "w1", {"id": "w1"}, 5)
    pipe = r.pipeline(transaction=False)
    queue_removal(pipe, BullpenKeys(), "worker", "w1")
    pipe.execute()
    assert fleet.list_workers() == []
    last = r.xrevrange("bullpen:stream:workers", count=1)[0][1]
    assert last["kind"] == "worker" and '"state":"stopped"' in last["record"]


def test_list_gpus_merges_host_readings_with_workers(
    r: redis.Redis, fleet: Fleet
) -> None:
    """Each GPU row: the host's reading, budget and committed VRAM summed over
    its workers, their ids, and its OOM count; a simulated GPU's use,
    utilisation and temperature come from the workers (only they hold
    simulated memory: the host's own reading says idle)."""
    gpu = {
        "uuid": "SIM-a-0",
        "index": 0,
        "simulated": True,
        "memory_total_bytes": 24 * GiB,
        "memory_used_bytes": 0,
        "utilization_gpu_pct": 0,
        "temperature_c": 35,
    }
    beat(r, "host", "a", {"host": "a", "gpus": [gpu]}, 5)
    beat(
        r,
        "worker",
        "a:bull:q:SIM-a-0",
        {
            "id": "a:bull:q:SIM-a-0",
            "host": "a",
            "state": "busy",
            "gpu": {
                "uuid": "SIM-a-0",
                "memory_used_bytes": 5 * GiB,
                "utilization_gpu_pct": 100,
                "temperature_c": 70,
            },
            "budget_bytes": 20 * GiB,
            "committed_bytes": 6 * GiB,
        },
        5,
    )
    r.hincrby("bullpen:gpu:SIM-a-0:counters", "oom_total", 2)
    [row] = fleet.list_gpus()
    assert row["host"] == "a" and row["workers"] == ["a:bull:q:SIM-a-0"]
    assert (row["budget_bytes"], row["committed_bytes"]) == (20 * GiB, 6 * GiB)
    assert row["memory_used_bytes"] == 5 * GiB
    assert row["memory_free_bytes"] == 19 * GiB and row["oom_total"] == 2
    assert (row["utilization_gpu_pct"], row["temperature_c"]) == (100, 70)
    assert row["utilization_memory_pct"] == 20


def test_list_gpus_counts_a_gpu_process_serving_two_queues_once(
    r: redis.Redis, fleet: Fleet
) -> None:
    """Two queues' records of one GPU process (same host and pid, each with
    `process`) carry the process's shared budget, committed VRAM and reading:
    the GPU row counts them once, and lists both workers."""
    gpu = {"uuid": "SIM-a-0", "index": 0, "simulated": True}
    gpu["memory_total_bytes"] = 24 * GiB
    beat(r, "host", "a", {"host": "a", "gpus": [gpu]}, 5)
    for queue in ("q1", "q2"):
        wid = f"a:bull:{queue}:SIM-a-0"
        record = {
            "id": wid,
            "host": "a",
            "pid": 4242,
            "process": {"pid": 4242, "queues": ["bull:q1", "bull:q2"]},
            "state": "busy",
            "gpu": {"uuid": "SIM-a-0", "memory_used_bytes": 9 * GiB},
            "budget_bytes": 21 * GiB,
            "committed_bytes": 8 * GiB,
        }
        beat(r, "worker", wid, record, 5)
    [row] = fleet.list_gpus()
    assert len(row["workers"]) == 2
    assert (row["budget_bytes"], row["committed_bytes"]) == (21 * GiB, 8 * GiB)
    assert row["memory_used_bytes"] == 9 * GiB


def test_bullpen_keys_never_live_inside_queue_keys(
    redis_url: str, qname: str, q: Queue, r: redis.Redis
) -> None:
    """After a worker ran jobs, every key is either the queue's own
    (`bull:{queue}:...`) or under Bullpen's namespace (`bullpen:...`)."""
    worker = WorkerThread(make_spec(redis_url, qname))
    job = q.add("demo", {"vram": "2GiB", "steps": 1, "step_s": 0.01})
    wait_until(lambda: q.get_job_state(job.id).value == "completed", what="the job")
    worker.stop()
    keys = r.keys("*")
    assert any(k.startswith("bullpen:job:") for k in keys)
    assert all(k.startswith((f"bull:{qname}:", "bullpen:")) for k in keys), keys
