"""Models benchmark: today's per-job loading vs resident models vs placement.

    .venv/bin/python bench/models.py [--jobs 400] [--rate 1.5] [--scale 0.2]
                                     [--gpus sim:4x80GiB] [--slots 4] [--modes abc]

One workload runs three ways on simulated GPUs, through real supervisors,
worker processes and Redis (bench/model_handlers.py declares the models):

  a  today's way: no model declared; each job declares weights + working
     memory and loads its model itself, every time
  b  resident models: loaded once per GPU, evicted least recently used,
     no placement (each GPU takes the next job in line), no warm pools
  c  resident models with placement (a job goes where its model is warm)
     and warm pools

Workload: 3 models (sdxl 7 GiB / 5 s load, flux 24 GiB / 15 s, video 40 GiB
/ 30 s), jobs of 2-6 s with 2-8 GiB of working memory, arriving at --rate
jobs/s (in scaled time), the mix shifting halfway from 70/20/10 to 10/20/70.
Every time is multiplied by --scale (printed); placement's age bound is 60 s
and its cold hold 2 s, scaled the same way. The rate sits above what (a) can
serve and below what (c) can: at --scale 0.05 the 2-core machine's CPU, not
the simulated GPUs, bounds every mode (the processes' per-job Redis work
then dominates 0.1 s jobs), so keep scaled jobs near a second.

Per mode it prints: jobs/s (jobs / (last finish - first add)), model loads
per 1,000 jobs, GPU-seconds spent loading (unscaled back to real seconds),
p95 wait per model (finish - add - run time: the queueing and loading a job
saw, unscaled), jobs that waited past the age bound, and the most VRAM
committed on one GPU against its budget (every heartbeat, and each worker's
own maximum) with the number of heartbeat samples over budget. Goals: (c)
>= 2x the jobs/s of (a), <= 1/5 of (b)'s loads, 0 samples over budget, no
wait beyond the age bound in (c). Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import fields
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis  # noqa: E402
from gpu_bench_lib import (  # noqa: E402
    Fleet,
    Queue,
    RedisServer,
    SupervisorRun,
    heartbeats,
    wait_for,
)
from model_handlers import MODELS  # noqa: E402

from gpu_workers.config import SupervisorConfig  # noqa: E402
from queues.devredis import interrupt_on_sigterm  # noqa: E402

MIX_BEFORE = {"sdxl": 0.7, "flux": 0.2, "video": 0.1}
MIX_AFTER = {"sdxl": 0.1, "flux": 0.2, "video": 0.7}
AGE_BOUND_S = 60.0
COLD_HOLD_S = 2.0


def workload(n: int, seed: int) -> list[dict[str, Any]]:
    """n jobs: model, working GiB and run seconds (unscaled)."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        mix = MIX_BEFORE if i < n // 2 else MIX_AFTER
        model = rng.choices(list(mix), weights=list(mix.values()))[0]
        jobs.append(
            {
                "model": model,
                "working_gib": round(rng.uniform(2, 8), 2),
                "run_s": round(rng.uniform(2, 6), 2),
            }
        )
    return jobs


def produce(queue: Queue, jobs: list[dict[str, Any]], name: str, rate: float) -> None:
    """Add the jobs at `rate` jobs/s (scaled time), in small batches."""
    start = time.monotonic()
    batch = max(1, int(rate / 20))
    for i in range(0, len(jobs), batch):
        due = start + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        queue.add_bulk([{"name": name, "data": d} for d in jobs[i : i + batch]])


def run(
    mode: str, args: argparse.Namespace, url: str, jobs: list[dict[str, Any]]
) -> dict[str, Any]:
    r = redis.Redis.from_url(url, decode_responses=True)
    r.flushdb()
    queue_name = f"models-{mode}"
    scale = args.scale
    overrides: dict[str, Any] = {
        "child_env": {"BULLPEN_BENCH_TIME_SCALE": str(scale)},
        "placement": mode == "c",
        "placement_age_bound_s": AGE_BOUND_S * scale,
        "placement_cold_hold_s": COLD_HOLD_S * scale,
        "model_pools": mode == "c",
    }
    known = {f.name for f in fields(SupervisorConfig)}
    missing = sorted(k for k in overrides if k not in known)
    if missing:
        print(f"  (mode {mode}: this build has no {', '.join(missing)}: left out)")
    overrides = {k: v for k, v in overrides.items() if k in known}
    sup = SupervisorRun(
        url,
        f"bench-{mode}",
        args.gpus,
        [{"queue": queue_name, "slots": args.slots, "max_slots": args.slots}],
        ["bench.model_handlers"],
        **overrides,
    )
    fleet = Fleet(url)
    queue = Queue(queue_name, url)
    name = "bench.perjob" if mode == "a" else "bench.gen"
    try:
        n_gpus = len(wait_for(lambda: fleet.list_hosts(), 30, "the host")[0]["gpus"])
        wait_for(
            lambda: (
                len([w for w in fleet.list_workers() if w["state"] == "idle"]) == n_gpus
            ),
            60,
            "idle workers",
        )
        produce(queue, jobs, name, args.rate / scale)

        def finished() -> bool:
            c = queue.get_counts("completed", "failed")
            return c["completed"] + c["failed"] >= len(jobs)

        wait_for(finished, args.timeout, f"mode {mode} to finish", 0.2)
        done = queue.get_jobs(["completed", "failed"], 0, -1)
        failed = queue.get_counts("failed")["failed"]
        beats = heartbeats(r)
        events = [f for _i, f in r.xrange("bullpen:models:events")]
        workers = fleet.list_workers()
    finally:
        sup.stop()
        queue.close()
        fleet.close()
    first_add = min(j.timestamp for j in done)
    last_end = max(j.finished_on or 0 for j in done)
    waits: dict[str, list[float]] = defaultdict(list)
    for j in done:
        if j.finished_on:
            run_ms = float(j.data["run_s"]) * scale * 1000
            waits[j.data["model"]].append(
                (j.finished_on - j.timestamp - run_ms) / scale / 1000
            )
    if mode == "a":
        loads = len(done)
        load_s = sum(MODELS[j.data["model"]][1] for j in done)
    else:
        loads = sum(1 for e in events if e["kind"] == "load")
        load_s = sum(float(e["seconds"]) for e in events if e["kind"] == "load") / scale
    budget = max((b["budget_bytes"] for b in beats), default=1)
    committed = max((b["committed_bytes"] for b in beats), default=0)
    reported = max((w.get("max_committed_bytes", 0) for w in workers), default=0)
    reported = max([reported] + [b.get("max_committed_bytes", 0) for b in beats])
    over = sum(1 for b in beats if b["committed_bytes"] > b["budget_bytes"])
    all_waits = [w for ws in waits.values() for w in ws]
    return {
        "mode": mode,
        "jobs": len(done),
        "failed": failed,
        "jobs_per_s": len(done) / max((last_end - first_add) / 1000, 1e-9),
        "loads_per_1000": 1000 * loads / max(len(done), 1),
        "loads": loads,
        "gpu_s_loading": load_s,
        "p95_wait_s": {m: p95(ws) for m, ws in sorted(waits.items())},
        "past_age_bound": sum(1 for w in all_waits if w > AGE_BOUND_S),
        "max_committed_ratio": max(committed, reported) / budget,
        "samples": len(beats),
        "samples_over_budget": over,
        "evictions": sum(1 for e in events if e["kind"] == "evict"),
    }


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--rate", type=float, default=1.5, help="jobs/s, unscaled")
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--gpus", default="sim:4x80GiB")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--modes", default="abc")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    jobs = workload(args.jobs, args.seed)
    print(
        f"{args.jobs} jobs at {args.rate:g}/s on {args.gpus} (simulated), "
        f"{args.slots} slots per GPU; every time x {args.scale:g} "
        f"(figures below are unscaled back to real seconds)"
    )
    server = RedisServer().start()
    results = []
    try:
        for mode in args.modes:
            results.append(run(mode, args, server.url, jobs))
    finally:
        server.stop()
    print(
        f"{'mode':<5}{'jobs/s':>9}{'loads/1k':>10}{'GPU-s load':>12}"
        f"{'p95 wait s (sdxl/flux/video)':>32}{'>age':>6}{'max/budget':>12}"
        f"{'over':>6}{'failed':>8}"
    )
    for res in results:
        w = res["p95_wait_s"]
        waits = "/".join(f"{w.get(m, 0):.1f}" for m in MODELS)
        print(
            f"{res['mode']:<5}{res['jobs_per_s'] * args.scale:9.2f}"
            f"{res['loads_per_1000']:10.1f}{res['gpu_s_loading']:12.0f}"
            f"{waits:>32}{res['past_age_bound']:6d}"
            f"{res['max_committed_ratio']:12.3f}{res['samples_over_budget']:6d}"
            f"{res['failed']:8d}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    by = {res["mode"]: res for res in results}
    ok = all(res["samples_over_budget"] == 0 and res["failed"] == 0 for res in results)
    if "a" in by and "c" in by:
        ratio = by["c"]["jobs_per_s"] / by["a"]["jobs_per_s"]
        print(f"jobs/s (c)/(a): {ratio:.2f}x (goal >= 2)")
        ok = ok and ratio >= 2
    if "b" in by and "c" in by:
        loads = by["c"]["loads"] / max(by["b"]["loads"], 1)
        print(f"loads (c)/(b): {loads:.2f} (goal <= 0.2)")
        ok = ok and loads <= 0.2
    if "c" in by:
        ok = ok and by["c"]["past_age_bound"] == 0
    print("goals met" if ok else "GOALS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main()
    print(f"(bench took {time.monotonic() - t0:.1f} s)")
    sys.exit(code)
