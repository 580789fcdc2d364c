"""Packing benchmark: VRAM-aware admission vs concurrency 1 per GPU.

    .venv/bin/python bench/packing.py [--gpus sim:2x80GiB] [--small 40] [--large 8]
                                      [--time-scale 1.0]

The same mixed workload -- many small jobs (2-6 GiB, short) and a few large
ones (35-60 GiB, long), shuffled with a fixed seed -- runs twice on
simulated devices through real supervisors and worker processes:

  admission  each GPU's worker has --slots slots and admits by declared VRAM
  conc-1     each GPU's worker has 1 slot (BullMQ's usual GPU setting)

It prints each run's completion time, the ratio (expected >= 2x for such a
mix), the most VRAM committed on any GPU at one moment (from each job's
recorded admitted/released times and from every heartbeat) against the
budget, and OOMs (0: simulated jobs hold exactly what they declare).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis  # noqa: E402
from gpu_bench_lib import (  # noqa: E402
    Fleet,
    GiB,
    Queue,
    RedisServer,
    SupervisorRun,
    gib,
    heartbeats,
    max_overlap,
    run_batch,
    wait_for,
)

from queues.devredis import interrupt_on_sigterm  # noqa: E402


def workload(small: int, large: int, scale: float, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    jobs = [
        {
            "vram": int(rng.uniform(2, 6) * GiB),
            "steps": 4,
            "step_s": round(0.1 * scale, 4),
        }
        for _ in range(small)
    ]
    jobs += [
        {
            "vram": int(rng.uniform(35, 60) * GiB),
            "steps": 4,
            "step_s": round(0.3 * scale, 4),
        }
        for _ in range(large)
    ]
    rng.shuffle(jobs)
    return [{"name": "demo", "data": d} for d in jobs]


def run(
    url: str, gpus: str, slots: int, jobs: list[dict[str, Any]], label: str
) -> dict[str, Any]:
    r = redis.Redis.from_url(url, decode_responses=True)
    r.flushdb()
    queue_name = f"pack-{label}"
    sup = SupervisorRun(
        url,
        f"bench-{label}",
        gpus,
        [{"queue": queue_name, "slots": slots, "max_slots": max(slots, 1)}],
        ["gpu_workers.demo_handlers"],
    )
    fleet = Fleet(url)
    queue = Queue(queue_name, url)
    try:
        n_gpus = len(wait_for(lambda: fleet.list_hosts(), 20, "the host")[0]["gpus"])
        wait_for(
            lambda: (
                len([w for w in fleet.list_workers() if w["state"] == "idle"]) == n_gpus
            ),
            30,
            "idle workers",
        )
        seconds = run_batch(queue, jobs, timeout=600)
        records = [
            fleet.job_vram(queue_name, j.id)
            for j in queue.get_jobs(["completed", "failed"])
        ]
        beats = heartbeats(r)
        budget = max(w["budget_bytes"] for w in fleet.list_workers())
        failed = queue.get_counts("failed")["failed"]
        ooms = sum(g["oom_total"] for g in fleet.list_gpus())
    finally:
        sup.stop()
        queue.close()
        fleet.close()
    overlap = max_overlap(records)
    return {
        "label": label,
        "seconds": seconds,
        "budget": budget,
        "failed": failed,
        "ooms": ooms,
        "max_overlap": max(overlap.values()),
        "max_heartbeat": max((b["committed_bytes"] for b in beats), default=0),
        "max_reported": max((b["max_committed_bytes"] for b in beats), default=0),
    }


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpus", default="sim:2x80GiB")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--small", type=int, default=40)
    parser.add_argument("--large", type=int, default=8)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args()
    jobs = workload(args.small, args.large, args.time_scale, args.seed)
    declared = sum(j["data"]["vram"] for j in jobs)
    print(
        f"workload: {args.small} small (2-6 GiB, 4x{0.1 * args.time_scale:.2f}s) + "
        f"{args.large} large (35-60 GiB, 4x{0.3 * args.time_scale:.2f}s) jobs, "
        f"{gib(declared)} declared in all, on {args.gpus} (simulated)"
    )
    server = RedisServer().start()
    try:
        packed = run(server.url, args.gpus, args.slots, jobs, "admission")
        single = run(server.url, args.gpus, 1, jobs, "conc1")
    finally:
        server.stop()
    for res in (packed, single):
        print(
            f"  {res['label']:<10} {res['seconds']:7.2f} s   failed {res['failed']}   "
            f"OOMs {res['ooms']}   max committed {gib(res['max_overlap'])} "
            f"(heartbeats {gib(res['max_heartbeat'])}, worker max "
            f"{gib(res['max_reported'])}) of budget {gib(res['budget'])} per GPU"
        )
    ratio = single["seconds"] / packed["seconds"]
    print(f"completion-time ratio (concurrency 1 / VRAM admission): {ratio:.2f}x")
    ok = (
        packed["max_overlap"] <= packed["budget"]
        and packed["failed"] == 0
        and packed["ooms"] == 0
    )
    print("admission invariant held" if ok else "ADMISSION INVARIANT VIOLATED")
    return 0 if ok else 1


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main()
    print(f"(bench took {time.monotonic() - t0:.1f} s)")
    sys.exit(code)
