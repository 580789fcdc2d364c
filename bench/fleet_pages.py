"""The records-only mode of bench/fleet.py (`--records-only`): N hosts x 8
GPUs of realistic records published through heartbeat.py (fleet_records.py)
without running N workers, and the GPU page, overview and /metrics timed by
a real dashboard, with bytes and Redis commands per request; plus the
Redis counters both modes read."""

from __future__ import annotations

import argparse
import json
import os
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
from throughput_cluster import flush  # noqa: E402
from throughput_libs import BenchError, WorkerProcess  # noqa: E402

from gpu_workers import Fleet  # noqa: E402
from queues import Queue  # noqa: E402
from queues.cluster import is_cluster_client  # noqa: E402
from queues.connection import sync_from_url  # noqa: E402
from queues.devredis import RedisServer  # noqa: E402


def queue_names(backend: str, n: int) -> list[str]:
    return [f"{{fleet{i}}}" if backend == "cluster" else f"fleet{i}" for i in range(n)]


def commandstats(client: Any) -> dict[str, int]:
    """calls per command, summed over the primaries."""
    if is_cluster_client(client):
        infos = list(
            client.info("commandstats", target_nodes=client.PRIMARIES).values()
        )
    else:
        infos = [client.info("commandstats")]
    calls: dict[str, int] = {}
    for info in infos:
        for key, value in info.items():
            if key.startswith("cmdstat_"):
                calls[key[8:]] = calls.get(key[8:], 0) + int(value["calls"])
    return calls


# --- records only ---------------------------------------------------------------
#: Commands the records publisher sends (heartbeat.py): left out of the
#: dashboard's count. INFO: the bench's own counter reads.
PUBLISHER_COMMANDS = ("set", "zadd", "zremrangebyscore", "xadd", "info")
#: The pages a records-only run times (name, path).
RECORD_PAGES = (("gpu_page", "/gpus/"), ("overview", "/"), ("metrics", "/metrics"))


def capture_templates(args: argparse.Namespace, url: str, path: Path) -> None:
    """One real simulated host (bench/fleet_sim.py: a real Supervisor and its
    real GpuWorkers, 4 queues) publishes its records; they are kept as the
    templates bench/fleet_records.py copies per host."""
    client = sync_from_url(url, decode_responses=True)
    flush(client)
    sim = WorkerProcess(
        [
            sys.executable,
            str(BENCH / "fleet_sim.py"),
            "--url",
            url,
            "--hosts",
            "1",
            "--gpus",
            str(args.gpus_per_host),
            "--queues",
            ",".join(queue_names("single", 4)),
        ],
        "fleet_sim templates",
    )
    try:
        sim.read_json(120)
        time.sleep(2.5)  # a heartbeat after start: readings and state settled
        fleet = Fleet(client)
        hosts, workers = fleet.list_hosts(), fleet.list_workers()
        sim.send("STOP")
        sim.read_json(60)
        sim.finish(30)
    finally:
        sim.kill()
    if len(hosts) != 1 or len(workers) != args.gpus_per_host:
        raise BenchError(f"templates: {len(hosts)} hosts, {len(workers)} workers")
    path.write_text(json.dumps({"host": hosts[0], "workers": workers}))
    flush(client)
    client.close()


def live_records(client: Any) -> int:
    now = int(time.time() * 1000)
    return int(client.zcount("bullpen:hosts", f"({now}", "+inf")) + int(
        client.zcount("bullpen:workers", f"({now}", "+inf")
    )


def measure_records(
    args: argparse.Namespace, url: str, port: int, cookie: str, gpus: int, tpl: Path
) -> dict[str, Any]:
    """N hosts' records kept live by bench/fleet_records.py; each page timed,
    weighed, and its Redis commands per request counted (commandstats over
    the timed requests, less the publisher's own commands)."""
    hosts = max(1, gpus // args.gpus_per_host)
    client = sync_from_url(url, decode_responses=True)
    flush(client)
    print(
        f"  records only: {hosts} host(s) x {args.gpus_per_host} GPUs ...",
        file=sys.stderr,
        flush=True,
    )
    pub = WorkerProcess(
        [
            sys.executable,
            str(BENCH / "fleet_records.py"),
            "--url",
            url,
            "--templates",
            str(tpl),
            "--hosts",
            str(hosts),
        ],
        f"fleet_records {hosts}x{args.gpus_per_host}",
    )
    out: dict[str, Any] = {"gpus": hosts * args.gpus_per_host, "hosts": hosts}
    for name in queue_names("single", 4):  # the served queues have a backlog
        q = Queue(name, client)
        q.add_bulk([{"name": "noop", "data": {"i": i}} for i in range(args.backlog)])
    try:
        ready = pub.read_json(120)
        out["publisher"] = ready
        expected = ready["hosts"] + ready["workers"]
        time.sleep(args.settle_s)
        for name, path in RECORD_PAGES:
            marks: dict[str, Any] = {}

            def mark() -> None:
                marks["stats"] = commandstats(client)  # noqa: B023
                marks["live"] = live_records(client)  # noqa: B023

            page = time_page(
                port,
                path,
                cookie,
                args.requests,
                slow_ms=5000,
                timeout_s=180,
                before_timed=mark,
            )
            after = commandstats(client)
            spent = sum(
                after.get(k, 0) - marks.get("stats", {}).get(k, 0)
                for k in after
                if k not in PUBLISHER_COMMANDS
            )
            page["redis_commands_per_request"] = spent / max(page["n"], 1)
            page["live_records"] = min(marks.get("live", 0), live_records(client))
            page["expected_records"] = expected
            out[name] = page
        pub.send("STOP")
        pub.read_json(60)
        pub.finish(30)
    finally:
        pub.kill()
        client.close()
    return out


def print_records_report(rows: list[dict[str, Any]], label: str) -> None:
    print(
        f"\n{label}: GPU page, overview, /metrics at N simulated GPUs (records "
        "only): p50/p95 ms | bytes | Redis commands per request"
    )
    print(
        f"{'GPUs':>5} {'hosts':>5} | "
        + " | ".join(f"{name:<31}" for name, _ in RECORD_PAGES)
    )
    for r in rows:
        if "error" in r:
            print(f"{r['gpus']:>5} {r['hosts']:>5} | ERROR {r['error']}")
            continue
        cells = []
        for name, _ in RECORD_PAGES:
            p = r[name]
            cmds = p["redis_commands_per_request"]
            cells.append(f"{fmt_page(p):>11} {p['bytes']:>11,} {cmds:>7,.0f}")
        print(f"{r['gpus']:>5} {r['hosts']:>5} | " + " | ".join(cells))
    for r in rows:
        for name, _ in RECORD_PAGES:
            p = r.get(name) or {}
            if p and p.get("live_records", 0) < p.get("expected_records", 0):
                print(
                    f"note ({r['gpus']} GPUs, {name}): INVALID: only "
                    f"{p['live_records']} of {p['expected_records']} records live"
                )
    print(
        "timed requests per page: "
        + "; ".join(
            f"{r['gpus']} GPUs: "
            + ", ".join(
                f"{name} {r[name]['n']}" for name, _ in RECORD_PAGES if name in r
            )
            for r in rows
            if "error" not in r
        )
    )


def main_records(args: argparse.Namespace, sizes: list[int]) -> int:
    """--records-only: one redis-server, one dashboard (this checkout's, or
    --dashboard-root's), N hosts' records per size."""
    workdir = tempfile.mkdtemp(prefix="bullpen-fleet-")
    env, cookie = login_cookie(workdir)
    env["BULLPEN_SERIES_SAMPLING"] = "0"  # no sampler reads in the counts
    root = Path(args.dashboard_root).resolve() if args.dashboard_root else ROOT
    label = args.label or f"dashboard at {root}"
    server: Any = RedisServer().start()
    rows: list[dict[str, Any]] = []
    daphne = None
    failed = False
    try:
        tpl = Path(workdir) / "templates.json"
        capture_templates(args, server.url, tpl)
        daphne, port, log = start_dashboard(server.url, workdir, env, root)
        for gpus in sizes:
            try:
                rows.append(measure_records(args, server.url, port, cookie, gpus, tpl))
            except (BenchError, OSError) as exc:
                failed = True
                rows.append(
                    {
                        "gpus": gpus,
                        "hosts": gpus // args.gpus_per_host,
                        "error": str(exc).splitlines()[0],
                    }
                )
    finally:
        stop_dashboard(daphne)
        server.stop()
    print_records_report(rows, label)
    path = (
        Path(args.output)
        if args.output
        else BENCH / "results" / f"fleet-records-{datetime.now(UTC):%Y%m%d%H%M%S}.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "label": label,
                "cpus": os.cpu_count(),
                "config": vars(args),
                "rows": rows,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    print(f"results: {path}")
    return 1 if failed else 0
