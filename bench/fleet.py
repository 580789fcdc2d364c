"""Fleet-scale model: what N simulated GPU hosts cost one Redis, on one node and
on a 3-primary Redis Cluster.

    .venv/bin/python bench/fleet.py                       # 8, 64, 512 GPUs; both
    .venv/bin/python bench/fleet.py --sizes 8,64 --backends single --idle-s 4

For each backend (`single`: one redis-server; `cluster`: RedisClusterSet, 3
primaries, REDIS_URL=redis+cluster://...), started here, with one dashboard
(daphne, dashboard.serve, as bench/dashboard.py starts it) on it, and for each
size (simulated GPUs; --gpus-per-host each, so 8 GPUs = 1 host):

  idle     bench/fleet_sim.py runs the hosts' supervisors and one real GpuWorker
           per GPU (see there), no jobs, split over --sim-procs processes
           (default one per 128 GPUs). After --settle-s, over --idle-s:
           Redis commands/s (`total_commands_processed`, summed over the
           primaries), redis-server CPU (`used_cpu_user + used_cpu_sys`),
           network bytes in (`total_net_input_bytes`), the top commands
           (INFO commandstats), and the simulator's own CPU (/proc); divided
           per host. Heartbeat bytes: the JSON records' sizes (STRLEN) and
           what Redis holds for them (MEMORY USAGE of every bullpen:* key).
  pages    --requests GETs each of the GPU page (/gpus/, logged in) and
           /metrics (127.0.0.1 is on the default allow-list), after one
           warm-up: p50/p95 in ms, HTTP statuses counted.
  load     --jobs no-op jobs (job name `noop`, 1 GiB declared) bulk-added over
           4 queues (`fleet0..3` on one node, `{fleet0}..{fleet3}` on the
           cluster: each on its own slot, spread over the primaries) and worked
           by the simulated GPUs: jobs/s (first processedOn to last
           finishedOn), commands/s and CPU over that window.

--records-only (bench/fleet_records.py): N hosts x 8 GPUs of realistic host
and worker records (copied from one real simulated host's), published through
heartbeat.py and kept live, without running N workers; then --requests GETs
each of the GPU page, the overview and /metrics: p50/p95, bytes, and Redis
commands per request (INFO commandstats over the timed requests, less the
publisher's SET/ZADD/ZREMRANGEBYSCORE/XADD and the bench's INFO). A page
whose warm-up takes over 5 s is timed 3 times. --dashboard-root serves
another checkout's dashboard (a "before" run: `git worktree add` main).

    .venv/bin/python bench/fleet.py --records-only                # 64,512,4096
    .venv/bin/python bench/fleet.py --records-only --dashboard-root /tmp/before

Everything shares this machine's cores (printed). Figures are printed and
written to bench/results/fleet-<timestamp>.json; docs/scaling.md reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from fleet_dashboard import (  # noqa: E402
    fmt_page,
    login_cookie,
    start_dashboard,
    stop_dashboard,
    time_page,
)
from fleet_pages import commandstats, main_records, queue_names  # noqa: E402
from throughput_cluster import flush, server_counters  # noqa: E402
from throughput_libs import (  # noqa: E402
    BenchError,
    WorkerProcess,
    job_fields,
    process_cpu_us,
)

from queues import Queue  # noqa: E402
from queues.cluster import is_cluster_client  # noqa: E402
from queues.connection import sync_from_url  # noqa: E402
from queues.devredis import (  # noqa: E402
    RedisClusterSet,
    RedisServer,
    interrupt_on_sigterm,
)


def counters(client: Any, sim_pids: list[int]) -> dict[str, float]:
    """Redis' counters summed over the primaries, and the simulator's CPU."""
    out = server_counters(client)
    infos = (
        list(client.info("stats", target_nodes=client.PRIMARIES).values())
        if is_cluster_client(client)
        else [client.info("stats")]
    )
    out["net_in"] = float(sum(int(i["total_net_input_bytes"]) for i in infos))
    out["sim_cpu_s"] = sum((process_cpu_us(pid) or 0) for pid in sim_pids) / 1e6
    out["t"] = time.monotonic()
    return out


def rates(a: dict[str, float], b: dict[str, float], hosts: int) -> dict[str, float]:
    dt = b["t"] - a["t"]
    cmds = (b["commands"] - a["commands"]) / dt
    cpu = (b["cpu_s"] - a["cpu_s"]) / dt
    sim = (b["sim_cpu_s"] - a["sim_cpu_s"]) / dt
    net = (b["net_in"] - a["net_in"]) / dt
    return {
        "seconds": round(dt, 2),
        "commands_per_s": cmds,
        "commands_per_s_per_host": cmds / hosts,
        "redis_cpu_pct": 100 * cpu,
        "redis_cpu_ms_per_s_per_host": 1000 * cpu / hosts,
        "sim_cpu_pct": 100 * sim,
        "sim_cpu_ms_per_s_per_host": 1000 * sim / hosts,
        "net_in_bytes_per_s": net,
        "net_in_bytes_per_s_per_host": net / hosts,
    }


def heartbeat_bytes(client: Any) -> dict[str, Any]:
    """Sizes of the heartbeat records and what Redis holds for bullpen:* keys."""
    keys = list(client.scan_iter(match="bullpen:*", count=1000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key)
    memory = dict(zip(keys, pipe.execute(), strict=True))
    records = [k for k in keys if k.startswith(("bullpen:host:", "bullpen:worker:"))]
    pipe = client.pipeline(transaction=False)
    for key in records:
        pipe.strlen(key)
    sizes = dict(zip(records, pipe.execute(), strict=True))
    host_sizes = [v for k, v in sizes.items() if k.startswith("bullpen:host:")]
    worker_sizes = [v for k, v in sizes.items() if k.startswith("bullpen:worker:")]
    return {
        "host_record_bytes": sum(host_sizes) / max(len(host_sizes), 1),
        "worker_record_bytes": sum(worker_sizes) / max(len(worker_sizes), 1),
        "records": len(records),
        "memory_usage_bytes": sum(int(v or 0) for v in memory.values()),
        "stream_memory_bytes": int(memory.get("bullpen:stream:workers") or 0),
    }


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, from /proc."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def split(hosts: int, procs: int) -> list[tuple[int, int]]:
    """(first host, hosts) for each simulator process."""
    out, first = [], 0
    for i in range(procs):
        n = hosts // procs + (1 if i < hosts % procs else 0)
        out.append((first, n))
        first += n
    return out


def run_load(
    client: Any, url: str, queues: list[str], jobs: int, hosts: int, sim_pids: list[int]
) -> dict[str, Any]:
    per = [
        jobs // len(queues) + (1 if i < jobs % len(queues) else 0)
        for i in range(len(queues))
    ]
    for q, n in zip(queues, per, strict=True):
        with Queue(q, connection=url) as queue:
            queue.add_bulk([{"name": "noop", "data": {}} for _ in range(n)])
    # The workers start at once: the window runs from here to the last job.
    before = counters(client, sim_pids)
    deadline = time.monotonic() + max(60, jobs / 50)
    while time.monotonic() < deadline:
        pipe = client.pipeline(transaction=False)
        for q in queues:
            pipe.zcard(f"bull:{q}:completed")
            pipe.zcard(f"bull:{q}:failed")
        if sum(pipe.execute()) >= jobs:
            break
        time.sleep(0.05)
    after = counters(client, sim_pids)
    processed, finished, failed = [], [], 0
    for q in queues:
        failed += int(client.zcard(f"bull:{q}:failed"))
        for p, f in job_fields(client, q, ("processedOn", "finishedOn")):
            if p and f:
                processed.append(int(p))
                finished.append(int(f))
    out = rates(before, after, hosts)
    out.update({"jobs": jobs, "completed": len(processed), "failed": failed})
    if processed:
        span = max(max(finished) - min(processed), 1) / 1000
        out["jobs_per_s"] = len(processed) / span
    return out


def measure_size(
    args: argparse.Namespace, backend: str, url: str, port: int, cookie: str, gpus: int
) -> dict[str, Any]:
    hosts = max(1, gpus // args.gpus_per_host)
    queues = queue_names(backend, 4)
    client = sync_from_url(url, decode_responses=True)
    flush(client)
    print(
        f"  {backend}: {hosts} host(s) x {args.gpus_per_host} GPUs ...",
        file=sys.stderr,
        flush=True,
    )
    procs = max(1, min(hosts, args.sim_procs or -(-hosts * args.gpus_per_host // 128)))
    sims = [
        WorkerProcess(
            [
                sys.executable,
                str(BENCH / "fleet_sim.py"),
                "--url",
                url,
                "--first-host",
                str(first),
                "--hosts",
                str(n),
                "--gpus",
                str(args.gpus_per_host),
                "--queues",
                ",".join(queues),
            ],
            f"fleet_sim {n}x{args.gpus_per_host}",
        )
        for first, n in split(hosts, procs)
    ]
    pids = [sim.proc.pid for sim in sims]
    out: dict[str, Any] = {
        "backend": backend,
        "gpus": hosts * args.gpus_per_host,
        "hosts": hosts,
    }
    try:
        replies = [sim.read_json(180) for sim in sims]
        out["sim"] = ready = {
            "procs": procs,
            "workers": sum(r["workers"] for r in replies),
            "running": sum(r["running"] for r in replies),
            "notes": sorted({n for r in replies for n in r["notes"]}),
        }
        time.sleep(args.settle_s)
        stats0 = commandstats(client)
        before = counters(client, pids)
        time.sleep(args.idle_s)
        idle = rates(before, counters(client, pids), hosts)
        stats1 = commandstats(client)
        top = sorted(
            ((stats1.get(k, 0) - stats0.get(k, 0), k) for k in stats1), reverse=True
        )
        idle["top_commands_per_s"] = {
            k: round(n / idle["seconds"], 2) for n, k in top[:12] if n
        }
        out["idle"] = idle
        out["heartbeat"] = heartbeat_bytes(client)
        out["heartbeat"]["expected_records"] = hosts + ready["workers"]
        out["sim_rss_bytes"] = sum(rss_bytes(pid) for pid in pids)
        out["gpu_page"] = time_page(port, "/gpus/", cookie, args.requests)
        out["metrics"] = time_page(port, "/metrics", cookie, args.requests)
        # Issue 15's pages: one row per worker connection, and per primary.
        out["workers_page"] = time_page(port, "/workers/", cookie, args.requests)
        out["redis_page"] = time_page(port, "/redis/", cookie, args.requests)
        out["load"] = run_load(client, url, queues, args.jobs, hosts, pids)
        for sim in sims:
            sim.send("STOP")
        for sim in sims:
            sim.read_json(60)
            sim.finish(30)
    finally:
        for sim in sims:
            sim.kill()
        client.close()
    return out


def print_report(rows: list[dict[str, Any]]) -> None:
    print(
        f"\n{'backend':<8} {'GPUs':>4} {'hosts':>5} | idle: {'cmds/s':>7} "
        f"{'/host':>6} {'redis%':>6} {'ms/s/host':>9} {'sim%':>5} {'B/s/host':>8} "
        f"| hb bytes host/worker | GPU page p50/p95 ms | /metrics p50/p95 ms "
        f"| load: {'jobs/s':>6} {'cmds/s':>7} {'redis%':>6}"
    )
    for r in rows:
        if "error" in r:
            print(
                f"{r['backend']:<8} {r['gpus']:>4} {r['hosts']:>5} | ERROR {r['error']}"
            )
            continue
        i, h, ld = r["idle"], r["heartbeat"], r["load"]
        print(
            f"{r['backend']:<8} {r['gpus']:>4} {r['hosts']:>5} | "
            f"      {i['commands_per_s']:>7,.0f} {i['commands_per_s_per_host']:>6,.0f} "
            f"{i['redis_cpu_pct']:>6.1f} {i['redis_cpu_ms_per_s_per_host']:>9.2f} "
            f"{i['sim_cpu_pct']:>5.0f} {i['net_in_bytes_per_s_per_host']:>8,.0f} "
            f"| {h['host_record_bytes']:>7,.0f}/{h['worker_record_bytes']:<7,.0f}"
            f"      | {fmt_page(r['gpu_page']):<19} | {fmt_page(r['metrics']):<19} "
            f"| {ld.get('jobs_per_s', 0):>12,.0f} {ld['commands_per_s']:>7,.0f} "
            f"{ld['redis_cpu_pct']:>6.1f}"
        )
    for r in rows:
        if "workers_page" in r:
            print(
                f"{r['backend']}, {r['gpus']} GPUs: workers page p50/p95 ms "
                f"{fmt_page(r['workers_page'])}, Redis page {fmt_page(r['redis_page'])}"
            )
    for r in rows:
        for note in (r.get("sim") or {}).get("notes", []):
            print(f"note ({r['backend']}, {r['gpus']} GPUs): {note}")
        if r.get("load", {}).get("failed"):
            n = r["load"]["failed"]
            print(f"note ({r['backend']}, {r['gpus']} GPUs): {n} jobs failed")
        if r.get("idle"):
            top = r["idle"]["top_commands_per_s"]
            print(f"top idle commands/s ({r['backend']}, {r['gpus']} GPUs): {top}")
            hb = r["heartbeat"]
            if hb["records"] < hb["expected_records"]:
                print(
                    f"note ({r['backend']}, {r['gpus']} GPUs): INVALID: only "
                    f"{hb['records']} of {hb['expected_records']} heartbeat records "
                    "were live: the simulator fell behind (records expire after 3 "
                    "missed beats), so this row measures the simulator, not Redis"
                )
            print(
                f"simulator ({r['backend']}, {r['gpus']} GPUs): "
                f"{r['sim_rss_bytes'] / 2**20:,.0f} MiB resident, "
                f"{r['sim_rss_bytes'] / r['gpus'] / 2**20:.1f} MiB per GPU worker"
            )
            if r["idle"]["sim_cpu_pct"] > 85:
                print(
                    f"note ({r['backend']}, {r['gpus']} GPUs): the simulator used "
                    f"{r['idle']['sim_cpu_pct']:.0f}% of a core: it may lag, so "
                    "its Redis load is a lower bound"
                )
    print(
        "redis% = redis-server CPU (all primaries) in % of one core; ms/s/host = "
        "redis CPU ms per second per host; sim% = the simulator processes (all "
        "hosts' supervisors and workers) in % of one core; B/s/host = network "
        "bytes into Redis per second per host."
    )


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="8,64,512", help="simulated GPUs, comma-separated"
    )
    parser.add_argument("--gpus-per-host", type=int, default=8)
    parser.add_argument(
        "--sim-procs",
        type=int,
        default=0,
        help="simulator processes (default: one per 128 GPUs)",
    )
    parser.add_argument("--backends", default="single,cluster")
    parser.add_argument("--settle-s", type=float, default=3.0)
    parser.add_argument("--idle-s", type=float, default=6.0)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument(
        "--output", help="JSON file (default bench/results/fleet-*.json)"
    )
    parser.add_argument(
        "--records-only",
        action="store_true",
        help="publish N hosts' records (bench/fleet_records.py) instead of "
        "running N supervisors and 8N workers; time the GPU page, the overview "
        "and /metrics (default sizes 64,512,4096)",
    )
    parser.add_argument(
        "--dashboard-root",
        help="serve the dashboard of this checkout (a 'before' run of main)",
    )
    parser.add_argument("--label", help="the records-only table's title")
    parser.add_argument(
        "--backlog", type=int, default=50, help="records only: jobs waiting per queue"
    )
    args = parser.parse_args()
    if args.records_only:
        if args.sizes == "8,64,512":
            args.sizes = "64,512,4096"
        return main_records(args, [int(s) for s in args.sizes.split(",")])
    sizes = [int(s) for s in args.sizes.split(",")]
    started = datetime.now(UTC)
    print(
        f"{os.cpu_count()} CPU cores shared by every redis-server, the dashboard, "
        f"the simulator and this script; Python {platform.python_version()}",
        flush=True,
    )
    workdir = tempfile.mkdtemp(prefix="bullpen-fleet-")
    env, cookie = login_cookie(workdir)
    rows: list[dict[str, Any]] = []
    failed = False
    for backend in args.backends.split(","):
        server: Any = (
            RedisClusterSet(3) if backend == "cluster" else RedisServer()
        ).start()
        daphne = None
        try:
            daphne, port, log = start_dashboard(server.url, workdir, env)
            for gpus in sizes:
                try:
                    rows.append(
                        measure_size(args, backend, server.url, port, cookie, gpus)
                    )
                except (BenchError, OSError) as exc:
                    failed = True
                    rows.append(
                        {
                            "backend": backend,
                            "gpus": gpus,
                            "hosts": max(1, gpus // args.gpus_per_host),
                            "error": str(exc).splitlines()[0],
                        }
                    )
            if any(
                r.get("gpu_page", {}).get("error") or r.get("metrics", {}).get("error")
                for r in rows
                if r["backend"] == backend
            ):
                tail = log.read_text(errors="replace")[-1500:]
                print(f"daphne log ({backend}), tail:\n{tail}")
        finally:
            stop_dashboard(daphne)
            server.stop()
    print_report(rows)
    result = {
        "started": started.isoformat(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "config": vars(args),
        "rows": rows,
    }
    path = (
        Path(args.output)
        if args.output
        else BENCH / "results" / f"fleet-{started.strftime('%Y%m%d%H%M%S')}.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"results: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
