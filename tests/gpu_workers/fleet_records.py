"""A synthetic fleet for tests: N hosts x 8 simulated GPUs of host and worker
records, published through heartbeat.py's queue_heartbeat as supervisors and
workers publish theirs (one worker per GPU, queues dealt round-robin)."""

from __future__ import annotations

from typing import Any

from gpu_workers.clock import now_ms
from gpu_workers.heartbeat import queue_heartbeat
from gpu_workers.keys import BullpenKeys

GiB = 2**30
QUEUES = ("gpu0", "gpu1")
MODELS = ("sdxl", "llama")


def host_name(h: int) -> str:
    return f"node-{h:03d}"


def gpu_uuid(h: int, i: int) -> str:
    return f"GPU-{h:03d}-{i}"


def worker_id(h: int, i: int) -> str:
    return f"{host_name(h)}:bull:{QUEUES[(h * 8 + i) % len(QUEUES)]}:{gpu_uuid(h, i)}"


def host_record(h: int, gpus: int = 8) -> dict[str, Any]:
    return {
        "host": host_name(h),
        "state": "running",
        "mode": "simulated",
        "simulated": True,
        "gpus": [
            {
                "uuid": gpu_uuid(h, i),
                "index": i,
                "name": "Simulated 80GiB",
                "simulated": True,
                "memory_total_bytes": 80 * GiB,
                "memory_used_bytes": 0,
            }
            for i in range(gpus)
        ],
        "queues": {
            f"bull:{q}": {
                "prefix": "bull",
                "queue": q,
                "max_workers": gpus,
                "max_slots": 8,
                "default_slots": 2,
            }
            for q in QUEUES
        },
        "ts_ms": now_ms(),
    }


def worker_record(
    h: int, i: int, state: str = "idle", util: int = 5, used: int = GiB
) -> dict[str, Any]:
    """GPU i of host h's worker: busy ones hold one job."""
    busy = state == "busy"
    return {
        "id": worker_id(h, i),
        "host": host_name(h),
        "pid": 1000 + i,
        "queue": QUEUES[(h * 8 + i) % len(QUEUES)],
        "prefix": "bull",
        "gpu": {
            "uuid": gpu_uuid(h, i),
            "memory_total_bytes": 80 * GiB,
            "memory_used_bytes": used,
            "utilization_gpu_pct": util,
        },
        "simulated": True,
        "slots": 2,
        "budget_bytes": 70 * GiB,
        "committed_bytes": 4 * GiB if busy else 0,
        "running": (
            [
                {
                    "id": f"j{h}-{i}",
                    "name": "render",
                    "declared_bytes": 4 * GiB,
                    "admitted": True,
                    "state": "running",
                    "progress": 40,
                }
            ]
            if busy
            else []
        ),
        "counters": {"processed": 3, "failed": 0, "oom": 0},
        "restarts": 0,
        "state": state,
        "models": [
            {
                "name": MODELS[i % 2],
                "state": "resident",
                "weights_bytes": 8 * GiB,
                "users": 1 if busy else 0,
            }
        ],
        "ts_ms": now_ms(),
    }


def default_state(h: int, i: int) -> str:
    """The fleet's default: GPU 0 of every 4th host failed, odd GPUs busy."""
    if i == 0 and h % 4 == 3:
        return "failed"
    return "busy" if i % 2 else "idle"


def publish_fleet(
    client: Any,
    hosts: int,
    gpus: int = 8,
    ttl_s: float = 60,
    states: dict[tuple[int, int], str] | None = None,
) -> None:
    """Every host's and worker's record, in pipelines of a few hundred."""
    keys = BullpenKeys()
    pipe = client.pipeline(transaction=False)
    for h in range(hosts):
        queue_heartbeat(pipe, keys, "host", host_name(h), host_record(h, gpus), ttl_s)
        for i in range(gpus):
            state = (states or {}).get((h, i)) or default_state(h, i)
            util = 90 if state == "busy" else 5
            record = worker_record(h, i, state, util, (30 if util > 50 else 1) * GiB)
            queue_heartbeat(pipe, keys, "worker", record["id"], record, ttl_s)
        if h % 32 == 31:
            pipe.execute()
    pipe.execute()
