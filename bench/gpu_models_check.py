"""Real-GPU check of resident models (run by bench/gpu_device.sh after
bench/gpu_check.py; `--simulate` for a dry run on a simulated GPU).

    python bench/gpu_models_check.py [--simulate]

On GPU 0, one supervisor and worker process serving the queue `gpumodels`
with the models of bench/gpu_model_handlers.py (real `torch.nn.Module`s of 4
and 8 GiB of bf16 parameters; a model whose load allocates 1.2x the card),
the budget cut to 12 GiB (the safety margin raised) so both cannot stay:

 1. load and residency: two jobs of check.a -> one load, the model listed
    resident in the heartbeat with its weights;
 2. eviction: a check.b job evicts check.a (4 + 8 + 1 working > 12), check.a
    evicts check.b again; the probe (NVML by pid) confirmed each unload gave
    the memory back (no unreclaimed bytes in the heartbeat's weights);
 3. OOM during a load: check.oom OOMs, the worker evicts what is idle and
    retries once, then fails the job as "CUDA out of memory"; the worker
    process survives (same pid) and runs a check.a job after it.

Prints each step's result and the model events; exit status 0 when all held.
"""

from __future__ import annotations

import argparse
import json
import os
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
    wait_for,
)

from queues.devredis import interrupt_on_sigterm  # noqa: E402

QUEUE = "gpumodels"
BUDGET = 12 * GiB


def start(url: str, gpus: str, margin: int, simulate: bool) -> SupervisorRun:
    return SupervisorRun(
        url,
        "gpu-models",
        gpus,
        [{"queue": QUEUE, "slots": 1, "max_slots": 1}],
        ["bench.gpu_model_handlers"],
        margin_bytes=margin,
        child_env={"BULLPEN_CHECK_SIMULATE": "1" if simulate else "0"},
    )


def worker(fleet: Fleet) -> dict[str, Any] | None:
    workers = [w for w in fleet.list_workers() if w.get("queue") == QUEUE]
    return workers[0] if workers and workers[0].get("state") == "idle" else None


def events(r: redis.Redis) -> list[tuple[str, str]]:
    return [(f["kind"], f["model"]) for _i, f in r.xrange("bullpen:models:events")]


def run_job(queue: Queue, model: str) -> Any:
    job = queue.add("check.gen", {"model": model, "vram": "1GiB"})

    def done() -> Any:
        j = queue.get_job(job.id)
        return j if j is not None and j.finished_on else None

    return wait_for(done, 60, f"a {model} job")


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--simulate", action="store_true")
    args = parser.parse_args()
    gpus = "sim:1x24GiB" if args.simulate else "nvml"
    server = RedisServer().start()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    fleet = Fleet(server.url)
    queue = Queue(QUEUE, server.url)
    ok = True
    sup = None
    try:
        # Find the budget at the default margin, then cut it to BUDGET.
        sup = start(server.url, gpus, 0, args.simulate)
        first = wait_for(lambda: worker(fleet), 120, "the worker")
        sup.stop()
        wait_for(lambda: not fleet.list_workers(), 30, "the worker to stop")
        margin = max(first["budget_bytes"] - BUDGET, 0)
        sup = start(server.url, gpus, margin, args.simulate)
        w = wait_for(lambda: worker(fleet), 120, "the worker at 12 GiB")
        pid = w["pid"]
        print(f"budget {gib(w['budget_bytes'])} on {w['gpu'].get('name')}, pid {pid}")

        def check(label: str, cond: bool) -> None:
            nonlocal ok
            ok = ok and cond
            print(f"  [{'ok' if cond else 'FAILED'}] {label}")

        a1, a2 = run_job(queue, "check.a"), run_job(queue, "check.a")
        check("1. two check.a jobs completed", a1.returnvalue and a2.returnvalue)
        check("1. one load of check.a", events(r) == [("load", "check.a")])
        run_job(queue, "check.b")
        run_job(queue, "check.a")
        expected = [
            ("load", "check.a"),
            ("evict", "check.a"),
            ("load", "check.b"),
            ("evict", "check.b"),
            ("load", "check.a"),
        ]
        check(f"2. loads and evictions {events(r)}", events(r) == expected)
        time.sleep(1.5)  # a heartbeat after the last job
        rec = wait_for(lambda: worker(fleet), 30, "an idle worker")
        resident = [(m["name"], m["state"]) for m in rec.get("models", [])]
        check(f"2. resident {resident}", resident == [("check.a", "resident")])
        weights = rec.get("weights_bytes", -1)
        declared = next(m["weights_bytes"] for m in rec["models"])
        check(
            f"2. unloads gave the memory back (held {gib(weights)}, "
            f"model {gib(declared)})",
            weights == declared,
        )
        oom = run_job(queue, "check.oom")
        check(
            f"3. check.oom failed: {oom.failed_reason!r}",
            oom.failed_reason == "CUDA out of memory",
        )
        kinds = events(r)[len(expected) :]
        check(
            f"3. OOM, evict, retry, fail: {kinds}",
            kinds[:1] == [("load_oom", "check.oom")]
            and ("load_failed", "check.oom") in kinds,
        )
        after = run_job(queue, "check.a")
        w = wait_for(lambda: worker(fleet), 30, "the worker after the OOM")
        check(
            f"3. same pid {w['pid']} and a job after: {after.returnvalue}",
            w["pid"] == pid and bool(after.returnvalue),
        )
        print(json.dumps(r.hgetall("bullpen:models:stats"), indent=1))
    except Exception as exc:  # noqa: BLE001 - report what the worker held
        ok = False
        held = [
            {k: w.get(k) for k in ("state", "models", "weights_bytes", "working_bytes")}
            for w in fleet.list_workers()
        ]
        print(f"\nERROR: {exc!r}\nworkers: {held}\nevents: {events(r)}")
        if sup is not None:
            print(sup.logs())
    finally:
        if sup is not None:
            sup.stop()
        queue.close()
        fleet.close()
        server.stop()
    print("all model checks passed" if ok else "MODEL CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
