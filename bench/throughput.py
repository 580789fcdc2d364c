"""Bullpen's throughput benchmark, side by side with Node.js BullMQ 6.

    .venv/bin/python bench/throughput.py [--jobs 10000] [--no-node] ...
    .venv/bin/python bench/throughput.py --compare-cluster [--queues 4]
    .venv/bin/python bench/throughput.py --queues 4 --redis redis+cluster://h:p,...

`--compare-cluster`, `--queues N` and a cluster `--redis` run Bullpen alone
over N hash-tagged queues (bench/throughput_cluster.py). `--redis URL` measures
on that server instead of starting one, and FLUSHES it.

One run starts one throwaway redis-server (a free port, never 6379, no
persistence) and measures on it, for Bullpen and -- where `node` and
bench/node/node_modules are there -- for BullMQ 6.7.0 (bench/node/bench.mjs):

  bulk add    N no-op jobs in one call (Queue.add_bulk / Queue.addBulk).
  processing  those N jobs by ONE worker in its own OS process, at
              concurrency 1, 10 and 50 (plus Bullpen with a plain `def`
              processor at 10), --rounds times each, the fastest round
              reported: jobs/s from the first job's processedOn to
              the last job's finishedOn, both read back from Redis; the
              worker process's CPU time (user + system, all threads, between
              the start signal and the stop signal) per job; and the
              redis-server's CPU time per job over the same window.
  producers   --add-jobs jobs added one call at a time (bench/throughput_adds.py):
              single add sync (`Queue.add` in a loop), single add async
              (`await AsyncQueue.add` in a loop), and concurrent adds from 50
              coroutines on one AsyncQueue (auto-pipelined), against BullMQ's
              `await queue.add` in a loop and 50 async loops on a Queue whose
              ioredis connection has `enableAutoPipelining: true`.
  pickup      jobs added one at a time, --pickup-interval-ms apart, to an
              idle worker at concurrency 1: p50/p99 of (the processor's start
              time - the adder's time just before its add call), both
              wall-clock with sub-ms precision; also p50/p99 of Redis'
              (processedOn - timestamp), which has 1 ms resolution.

Both libraries are measured by this script in the same way, interleaved
(each processing configuration runs for Bullpen, then for BullMQ), with fresh
queue names on the same server, the database flushed between measurements.
It prints one table and writes the figures as JSON to
bench/results/throughput-<timestamp>.json. `--runs 3` repeats the whole run
three times on the same server: the table then shows each figure's median and
its range [min-max], and the `bar:` lines check the issue's bars (Bullpen/BullMQ
ratios: single adds >= 1.0x, concurrent adds >= 1.5x, bulk add >= 1.2x,
c=1/10/50 >= 1.0/1.2/1.5x) against the median ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
NODE_DIR = BENCH / "node"
RESULTS = BENCH / "results"
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from throughput_adds import measure_producers  # noqa: E402
from throughput_cluster import compare_cluster, run_on  # noqa: E402
from throughput_libs import (  # noqa: E402
    CONCURRENCIES,
    SYNC_CONCURRENCY,
    BenchError,
    Budget,
    BullMQ,
    Bullpen,
    Library,
)
from throughput_measure import measure_pickup, measure_processing  # noqa: E402
from throughput_report import (  # noqa: E402
    bars,
    print_summary,
    summarize,
    table_rows,
    targets,
)

from queues.cluster import is_cluster_url  # noqa: E402
from queues.devredis import interrupt_on_sigterm  # noqa: E402
from tests.redis_server import RedisServer, find_redis_server  # noqa: E402


def measure_all(
    libs: list[Library],
    r: redis.Redis,
    args: argparse.Namespace,
    budget: Budget,
    tag: str,
    notes: list[str],
) -> dict[str, dict[str, Any]]:
    """Every measure of every library, interleaved (each processing config runs
    for Bullpen, then at once for BullMQ) so that both see the same machine
    load. A measure that fails or runs out of time is noted and skipped."""
    out: dict[str, dict[str, Any]] = {
        lib.name: {"processing": {}, "processing_rounds": {}, "pickup": None}
        for lib in libs
    }
    configs = [(f"c{c}", c, False) for c in CONCURRENCIES]
    configs.append((f"c{SYNC_CONCURRENCY}-def", SYNC_CONCURRENCY, True))
    for round_no in range(args.rounds):
        # Alternate which library goes first, so neither always runs second.
        order = libs if round_no % 2 == 0 else libs[::-1]
        for key, concurrency, sync in configs:
            for lib in order:
                if sync and not isinstance(lib, Bullpen):
                    continue
                if budget.left() < 30:  # keep time for the pickup measures
                    notes.append(
                        f"{lib.name} {key} round {round_no + 1}: skipped, out of time"
                    )
                    continue
                queue = f"bench-{lib.name.lower()}-{key}-r{round_no}-{tag}"
                cprofile = None
                if (
                    args.cprofile
                    and isinstance(lib, Bullpen)
                    and concurrency == 50
                    and not sync
                    and round_no == 0
                ):
                    cprofile = args.cprofile
                what = " (def processor)" if sync else ""
                print(
                    f"  round {round_no + 1}/{args.rounds}, {lib.name}: "
                    f"{args.jobs} jobs, concurrency {concurrency}{what} ...",
                    file=sys.stderr,
                    flush=True,
                )
                try:
                    result = measure_processing(
                        lib,
                        r,
                        queue,
                        args.jobs,
                        concurrency,
                        budget,
                        sync=sync,
                        cprofile=cprofile,
                    )
                    out[lib.name]["processing_rounds"].setdefault(key, []).append(
                        result
                    )
                except BenchError as exc:
                    notes.append(f"{lib.name} {key} round {round_no + 1}: {exc}")
                finally:
                    r.flushdb()
    for result in out.values():
        # Interference from the rest of the machine only ever slows a run down,
        # so each configuration reports its fastest round (all are in the JSON).
        for key, rounds in result["processing_rounds"].items():
            result["processing"][key] = max(rounds, key=lambda p: p["jobs_per_s"])
    for lib in libs:
        if not args.pickup_jobs or budget.left() < 10:
            notes.append(f"{lib.name} pickup: skipped")
            continue
        print(
            f"  {lib.name}: pickup latency, {args.pickup_jobs} jobs "
            f"{args.pickup_interval_ms:g} ms apart ...",
            file=sys.stderr,
            flush=True,
        )
        try:
            out[lib.name]["pickup"] = measure_pickup(
                lib,
                r,
                f"bench-{lib.name.lower()}-pickup-{tag}",
                args.pickup_jobs,
                args.pickup_interval_ms,
                budget,
            )
        except BenchError as exc:
            notes.append(f"{lib.name} pickup: {exc}")
        finally:
            r.flushdb()
    for result in out.values():
        adds = [
            p["bulk_add_jobs_per_s"]
            for rounds in result["processing_rounds"].values()
            for p in rounds
        ]
        result["bulk_add_jobs_per_s"] = statistics.median(adds) if adds else None
        result["bulk_add_samples"] = adds
    return out


# --- report ---------------------------------------------------------------------
def node_status(args: argparse.Namespace) -> tuple[str | None, str]:
    """(node binary, '') when BullMQ can be measured, else (None, why not)."""
    if args.no_node:
        return None, "BullMQ skipped (--no-node)"
    node = shutil.which("node")
    if not node:
        return None, "node not found on PATH: BullMQ figures skipped, Bullpen only"
    if not (NODE_DIR / "node_modules" / "bullmq").is_dir():
        return None, (
            "bench/node/node_modules is missing (run `make node-deps`): "
            "BullMQ figures skipped, Bullpen only"
        )
    return node, ""


def redis_version(r: redis.Redis) -> str:
    return str(r.info("server").get("redis_version"))


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", type=int, default=10_000, help="jobs per processing run"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="processing runs per configuration; the fastest is reported",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="whole runs, each with its own --budget-s; the table shows each "
        "figure's median and range over them",
    )
    parser.add_argument(
        "--add-jobs",
        type=int,
        default=3000,
        help="jobs per producer measure (single adds sync/async, concurrent adds); "
        "0 skips them",
    )
    parser.add_argument("--pickup-jobs", type=int, default=200)
    parser.add_argument("--pickup-interval-ms", type=float, default=20.0)
    parser.add_argument("--no-node", action="store_true", help="measure Bullpen only")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=170.0,
        help="overall time limit; measures left when it runs out are skipped",
    )
    parser.add_argument(
        "--cprofile",
        metavar="FILE",
        help="cProfile the Bullpen c=50 worker into FILE (slows it down)",
    )
    parser.add_argument(
        "--output", help="JSON file (default bench/results/throughput-*.json)"
    )
    parser.add_argument(
        "--redis",
        metavar="URL",
        help="measure on this Redis (redis:// or redis+cluster://) instead of "
        "starting one; its data is FLUSHED",
    )
    parser.add_argument(
        "--queues",
        type=int,
        default=1,
        help="spread the jobs over N queues {tp0}..{tpN-1}, one worker process "
        "each (Bullpen only; see bench/throughput_cluster.py)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=50,
        help="each worker's concurrency with --queues N or --compare-cluster",
    )
    parser.add_argument(
        "--compare-cluster",
        action="store_true",
        help="the --queues workload (default 4) on a 3-primary cluster and on one "
        "node, both started here; prints jobs/s and the ratio cluster/single",
    )
    args = parser.parse_args()
    if args.compare_cluster:
        if args.queues == 1:
            args.queues = 4
        return compare_cluster(args)
    if args.queues > 1 or (args.redis and is_cluster_url(args.redis)):
        return run_on(args)

    budget = Budget(args.budget_s)
    started = datetime.now(UTC)
    tag = started.strftime("%Y%m%d%H%M%S")
    notes: list[str] = []
    node, why = node_status(args)

    server = None if args.redis else RedisServer().start()
    url = args.redis or server.url  # type: ignore[union-attr]
    try:
        r = redis.Redis.from_url(url, decode_responses=True)
        r.flushdb()
        env: dict[str, Any] = {
            "redis_server": find_redis_server() if server else url,
            "redis_version": redis_version(r),
            "redis_port": r.connection_pool.connection_kwargs.get("port"),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        }
        print(
            f"redis-server {env['redis_version']} ({env['redis_server']}) on port "
            f"{env['redis_port']}; Python {env['python']}; {env['cpus']} CPUs",
            file=sys.stderr,
        )
        bullmq_lib: BullMQ | None = None
        if node:
            bullmq_lib = BullMQ(url, node)
            try:
                env.update(bullmq_lib.version())
                print(
                    f"Node {env['node']}, bullmq {env['bullmq']}, "
                    f"ioredis {env['ioredis']}",
                    file=sys.stderr,
                )
            except (BenchError, subprocess.SubprocessError, ValueError) as exc:
                why = f"node bench.mjs does not run ({exc}): BullMQ figures skipped"
                bullmq_lib = None
        if why:
            print(why)
            notes.append(why)

        # Warm up: load both libraries' scripts into the server.
        Bullpen(url).bulk_add(f"bench-warmup-bullpen-{tag}", 100, budget)
        if bullmq_lib:
            try:
                bullmq_lib.bulk_add(f"bench-warmup-bullmq-{tag}", 100, budget)
            except BenchError as exc:
                notes.append(f"BullMQ warm-up: {exc}")
        r.flushdb()

        libs: list[Library] = [Bullpen(url)]
        if bullmq_lib:
            libs.append(bullmq_lib)
        runs: list[dict[str, dict[str, Any]]] = []
        for run_no in range(args.runs):
            if args.runs > 1:
                print(f"run {run_no + 1}/{args.runs}", file=sys.stderr)
                budget = Budget(args.budget_s)
            run_tag = f"{tag}-{run_no}"
            measured = measure_all(libs, r, args, budget, run_tag, notes)
            if args.add_jobs:
                adds = measure_producers(libs, r, args.add_jobs, budget, run_tag, notes)
                for name, rates in adds.items():
                    measured[name]["adds"] = rates
            runs.append(measured)
    finally:
        if server is not None:
            server.stop()

    bm_present = "BullMQ" in runs[0]
    tables = [table_rows(m["Bullpen"], m.get("BullMQ")) for m in runs]
    summary = summarize(tables)
    print()
    versus = (
        f"vs BullMQ {env['bullmq']} (Node {env['node']})"
        if bm_present
        else "(BullMQ not measured)"
    )
    print(
        f"Bullpen {versus}, redis {env['redis_version']}, {env['cpus']} CPUs, "
        f"one worker process, {args.jobs} no-op jobs per run, best of {args.rounds}"
        f" rounds; producers: {args.add_jobs} adds; "
        + (f"median [range] of {args.runs} runs" if args.runs > 1 else "one run")
    )
    print_summary(summary, bm_present)
    if bm_present:
        print(
            "ratio > 1 = Bullpen better (jobs/s: Bullpen/BullMQ; us and ms: "
            "BullMQ/Bullpen). The def-processor rows compare with BullMQ at the same "
            "concurrency. Concurrent adds: BullMQ with ioredis enableAutoPipelining."
        )
    print(
        f"pickup: {args.pickup_jobs} jobs, {args.pickup_interval_ms:g} ms apart, "
        "idle worker at c=1; processor start - adder's time before add "
        "(processedOn-timestamp rows: 1 ms resolution)"
    )
    last = runs[-1]
    for line in targets(last["Bullpen"], last.get("BullMQ")):
        print("target: " + line)
    for line in bars(summary, args.runs):
        print("bar: " + line)
    for note in notes:
        print("note: " + note.splitlines()[0])

    result = {
        "started": started.isoformat(),
        "config": {
            "jobs": args.jobs,
            "rounds": args.rounds,
            "runs": args.runs,
            "add_jobs": args.add_jobs,
            "concurrency": list(CONCURRENCIES),
            "sync_concurrency": SYNC_CONCURRENCY,
            "pickup_jobs": args.pickup_jobs,
            "pickup_interval_ms": args.pickup_interval_ms,
        },
        "env": env,
        "runs": [
            {"bullpen": m["Bullpen"], "bullmq": m.get("BullMQ"), "table": t}
            for m, t in zip(runs, tables)
        ],
        "summary": summary,
        "bars": bars(summary, args.runs),
        "notes": notes,
    }
    out = Path(args.output) if args.output else RESULTS / f"throughput-{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if args.cprofile:
        import pstats

        print(
            f"\ncProfile of the Bullpen c=50 worker ({args.cprofile}), "
            "top 25 by own time:"
        )
        pstats.Stats(args.cprofile).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
