"""The dashboard's cost at scale: pages and /metrics at 10k vs 1M jobs, and
live fan-out to many websocket clients.

    .venv/bin/python bench/dashboard.py                 # 1M jobs, 200 clients
    .venv/bin/python bench/dashboard.py --jobs 200000 --clients 100 --seconds 5

One run starts a throwaway redis-server (or uses --redis-url, whose db it
FLUSHES), a temporary SQLite database with one superuser, and:

  data       100 queues: 99 small ones (100 jobs each over waiting, delayed,
             completed and failed) and `bull:big`, which holds --small (10k),
             then --jobs (1M) jobs in one state (--state, default completed),
             written in the BullMQ 6 layout by a Lua script in batches of 10k.
  pages      server-side time of the overview (100 queues), the big queue's
             page (first page and a deep page), a job page and one /metrics
             scrape, the Redis page and the workers page, the GPU time page
             (over full GPU-time buckets: last 24 h by hour, 30 days by
             day), through Django's
             test client in this process (no network):
             --requests timed requests each after a warm-up, p50 and p95, at
             10k and again at 1M, and the ratio 1M / 10k (flat is ~1). The
             first overview after discovery is reset (as in a process that
             did not prewarm) is printed apart ("cold"): over 50,000 keys it
             lists the registry's queues at once while the SCAN runs (none
             the first time: the SCAN writes the registry), below it waits
             for the SCAN.
  batch      a select-all Retry of --batch-jobs (100k) failed jobs, run by
             the batch runner thread in this process, while the overview,
             the queue page and a job page are requested: their p95 during
             the batch next to their p95 without it (bench/dashboard_batch.py).
  fan-out    --servers daphne processes (default 1) serving
             dashboard.asgi:application, each on a free port; --clients
             websocket clients (spread over --client-procs processes,
             autobahn, and round-robin over the servers) follow `bull:busy`;
             a producer updates the progress of --busy-jobs jobs at --rate
             events/s for --seconds, each update carrying time.time().
             Delay = arrival - that time: p50/p95/p99. Redis calls/s over
             the window come from MONITOR (all commands, then minus the
             producer's own, and per server process by its sockets); each
             client counts frames carrying an event id it already had
             (duplicates: must be 0). The run is repeated with
             --clients-small clients so that the ratio shows calls/s not
             growing with clients. Clients all connect at once (a
             reconnect storm); a failed connect is retried with jittered
             backoff (5 tries), counted ("conn retries") and, past the
             last, reported ("gave up") rather than ending the run. Each
             daphne's output goes to
             daphne-<i>.log in the run's temporary directory (its path is
             printed; a failed run prints its tail).

Figures are printed and written to bench/results/dashboard-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dashboard_batch import measure_batch, print_batch  # noqa: E402
from dashboard_data import build_small_queues, fill, fill_gpu_time, seed_series  # noqa: E402
from dashboard_fanout import fanout, pct, wait_port  # noqa: E402

from dashboard.run import daphne_args  # noqa: E402 - the repo's package, not this file


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- pages --------------------------------------------------------------------------
def time_requests(
    client: Any, url: str, n: int, data: Any = None, **extra: Any
) -> dict[str, Any]:
    client.get(url, data, **extra)  # warm-up
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        response = client.get(url, data, **extra)
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return {
        "url": url,
        "p50_ms": pct(times, 0.5),
        "p95_ms": pct(times, 0.95),
        "max_ms": max(times),
    }


def measure_pages(
    client: Any, n: int, deep_page: int, job_id: str, state: str
) -> dict[str, Any]:
    """p50/p95 of each page over bull:big, whose jobs are all in `state`
    (with --state waiting the job page and list rows carry the waiting
    reason, read with bounded commands however long the queue)."""
    from django.urls import reverse

    queue = reverse("bullpen:queue", args=["bull", "big"])
    return {
        "overview": time_requests(client, reverse("bullpen:overview"), n),
        "queue page 1": time_requests(client, f"{queue}?state={state}", n),
        f"queue page {deep_page}": time_requests(
            client, f"{queue}?state={state}&page={deep_page}", n
        ),
        "job page": time_requests(
            client, reverse("bullpen:job", args=["bull", "big", job_id]), n
        ),
        "/metrics": time_requests(client, reverse("bullpen:metrics"), n),
        # Issue 15's pages: INFO, a bounded SCAN sample and the slowlog; the
        # CLIENT LIST census and GPU heartbeats; one page of the queue's
        # job schedulers.
        "redis page": time_requests(client, reverse("bullpen:redis"), n),
        "workers page": time_requests(client, reverse("bullpen:workers"), n),
        "schedulers page": time_requests(
            client, reverse("bullpen:schedulers", args=["bull", "big"]), n
        ),
        # Charts over time: 1 h reads the open minutes live from the queues,
        # 24 h / 7 d their kept 10-minute / hourly points (seed_series).
        **{
            f"{what} series {rng}": time_requests(client, url, n, data={"range": rng})
            for what, url in (
                ("queue", reverse("bullpen:queue-series", args=["bull", "big"])),
                ("overall", reverse("bullpen:series-overall")),
                ("gpu", reverse("bullpen:gpus-series")),
            )
            for rng in ("1h", "7d")
        },
        # GPU-time accounting: bounded buckets (full ones, see fill_gpu_time),
        # never jobs: the last 24 h by hour, and 30 days by day and job name.
        "gpu time 24h": time_requests(client, reverse("bullpen:gpu-time"), n),
        "gpu time 30d": time_requests(
            client, reverse("bullpen:gpu-time") + "?range=30d&group=name", n
        ),
        # The most hour buckets a view reads (168, each full).
        "gpu time 7d hourly": time_requests(
            client, reverse("bullpen:gpu-time") + "?range=7d&by=hour&group=name", n
        ),
    }


# --- fan-out ------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(prog="bench/dashboard.py")
    parser.add_argument("--redis-url")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument(
        "--state",
        default="completed",
        choices=["completed", "failed", "waiting", "delayed"],
    )
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--clients-small", type=int, default=20)
    parser.add_argument(
        "--client-procs", type=int, default=max(1, (os.cpu_count() or 2) // 2)
    )
    parser.add_argument("--busy-jobs", type=int, default=20)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--skip-pages", action="store_true")
    parser.add_argument("--skip-fanout", action="store_true")
    parser.add_argument("--batch-jobs", type=int, default=100_000)  # 0: skip
    parser.add_argument(
        "--servers", type=int, default=1, help="dashboard processes for fan-out"
    )
    args = parser.parse_args()

    from queues.devredis import RedisServer, interrupt_on_sigterm

    interrupt_on_sigterm()  # a killed run still stops its redis-server

    server = None
    redis_url = args.redis_url
    if not redis_url:
        server = RedisServer().start()
        redis_url = server.url
    workdir = tempfile.mkdtemp(prefix="bullpen-bench-")
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        BULLPEN_DB_PATH=os.path.join(workdir, "db.sqlite3"),
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        BULLPEN_DISCOVERY_TTL_S="600",
        BULLPEN_QUEUES="busy",
    )
    os.environ.update(env)
    daphnes: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    failed = False
    report: dict[str, Any] = {"redis_url": redis_url, "args": vars(args)}
    try:
        import django

        django.setup()
        import redis
        from django.core.management import call_command
        from django.test import Client
        from django.test.utils import setup_test_environment

        setup_test_environment()  # testserver host; templates rendered as served
        import dashboard.asgi  # noqa: F401 - the server's start-up (gc.freeze())

        call_command("migrate", verbosity=0)
        from django.contrib.auth.models import User

        admin = User.objects.create_superuser("bench", "", "bench")
        client = Client()
        client.force_login(admin)
        cookie = f"sessionid={client.cookies['sessionid'].value}"

        r = redis.Redis.from_url(redis_url, decode_responses=True)
        r.flushdb()
        t0 = time.perf_counter()
        build_small_queues(r, args.queues - 1)
        print(
            f"built {args.queues - 1} small queues in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )

        if not args.skip_pages:
            seed_series(r, [f"q{i:03d}" for i in range(args.queues - 1)] + ["big"])
            fill(r, "big", 1, args.small, args.state)
            from queues import Queue

            with Queue("big", redis_url) as big:  # a page of job schedulers
                for i in range(30):
                    big.upsert_job_scheduler(
                        f"s{i:02d}", cron=f"{i} * * * *", template={"name": "render"}
                    )
            fill_gpu_time(r)
            deep = max(args.small // 25 // 2, 2)
            job_id = str(args.small // 2)
            from dashboard.console import reads

            # Forget the start-up scan (it ran before the data was built): the
            # first overview below meets discovery cold, as a process that did
            # not prewarm. A request to another page first loads Django's
            # templates and code, so both cold figures time the same thing.
            client.get("/redis/")
            report["cold_overview_ms_small"] = cold_overview(client, reads, 3)
            report["pages_small"] = measure_pages(
                client, args.requests, deep, job_id, args.state
            )
            t0 = time.perf_counter()
            fill(r, "big", args.small + 1, args.jobs - args.small, args.state)
            print(
                f"filled bull:big to {args.jobs:,} {args.state} jobs in "
                f"{time.perf_counter() - t0:.1f} s "
                f"(used_memory {r.info('memory')['used_memory_human']})",
                flush=True,
            )
            # A fresh process: the discovery SCAN runs again; nothing is
            # registered yet, then (a second fresh process) what it wrote.
            r.delete("bullpen:queues")  # discovery's registry
            report["cold_overview_ms_big"] = cold_overview(client, reads)
            report["cold_overview_ms_big_registered"] = cold_overview(client, reads, 3)
            report["pages_big"] = measure_pages(
                client, args.requests, deep, job_id, args.state
            )
            print_pages(report, args)

        if args.batch_jobs:  # a select-all batch vs other pages' p95
            report["batch"] = measure_batch(
                client, r, fill, time_requests, pct, args.batch_jobs, args.requests
            )
            print_batch(report["batch"])

        if not args.skip_fanout:
            from queues import Queue

            busy = Queue("busy", redis_url)
            ids = [busy.add("render", {"i": i}).id for i in range(args.busy_jobs)]
            ports = [free_port() for _ in range(args.servers)]
            profile = os.environ.get("BENCH_PROFILE_DAPHNE")
            for i, port in enumerate(ports):
                wrap = ["-m", "cProfile", "-o", f"{profile}.{i}"] if profile else []
                logs.append(Path(workdir) / f"daphne-{i}.log")
                # Its output to a file: an unread pipe fills (64 KiB of
                # warnings) and then blocks daphne itself.
                with open(logs[-1], "wb") as log:
                    daphnes.append(
                        subprocess.Popen(
                            [sys.executable, *wrap, *daphne_args("127.0.0.1", port)],
                            cwd=ROOT,
                            env=env,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                        )
                    )
            print(f"daphne logs: {workdir}/daphne-*.log", flush=True)
            for port in ports:
                wait_port(port)
            runs = []
            for n in (args.clients_small, args.clients):
                print(f"fan-out: {n} clients ...", flush=True)
                runs.append(
                    fanout(
                        ports,
                        cookie,
                        n,
                        args.client_procs,
                        r,
                        busy,
                        ids,
                        args.rate,
                        args.seconds,
                        [d.pid for d in daphnes],
                    )
                )
            report["fanout"] = runs
            print_fanout(runs, args)
            failed = any(
                run["duplicates"] or run["failed_handshakes"] or run["gave_up"]
                for run in runs
            )
    except BaseException:
        failed = True
        raise
    finally:
        for daphne in daphnes:
            daphne.send_signal(2)
        for daphne in daphnes:
            try:
                daphne.wait(15)
            except subprocess.TimeoutExpired:
                daphne.kill()
        if failed:
            for log in logs:
                print(f"--- tail of {log}:")
                print(log.read_text(errors="replace")[-4000:])
        if server is not None:
            server.stop()
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    path = results / f"dashboard-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    print(f"wrote {path.relative_to(ROOT)}")
    if failed:
        sys.exit(
            "FAILED: duplicate frames, failed handshakes or clients that gave up "
            "connecting (see above)"
        )


def print_pages(report: dict[str, Any], args: argparse.Namespace) -> None:
    small, big = report["pages_small"], report["pages_big"]
    print()
    print(
        f"Server-side time, {args.requests} requests each (ms), 100 queues, "
        f"bull:big with {args.small:,} vs {args.jobs:,} {args.state} jobs"
    )
    print(
        f"{'':18} {'p50 small':>10} {'p95 small':>10} {'p50 big':>9} {'p95 big':>9} "
        f"{'p95 ratio':>10}"
    )
    for name in small:
        s, b = small[name], big[name]
        print(
            f"{name:18} {s['p50_ms']:10.1f} {s['p95_ms']:10.1f} {b['p50_ms']:9.1f} "
            f"{b['p95_ms']:9.1f} {b['p95_ms'] / s['p95_ms']:10.2f}"
        )
    print(
        f"cold overview (first overview of a process that did not prewarm: "
        f"over 50,000 keys it lists the registry's queues at once while the "
        f"discovery SCAN runs, below it waits for the SCAN; median of 3 but "
        f"the first at 1M): "
        f"{report['cold_overview_ms_small']:.0f} ms at {args.small:,}, "
        f"{report['cold_overview_ms_big']:.0f} ms at {args.jobs:,} with nothing "
        f"registered yet, {report['cold_overview_ms_big_registered']:.0f} ms "
        f"with the registry its SCAN wrote"
    )


def cold_overview(client: Any, reads: Any, times: int = 1) -> float:
    """ms of the first overview after discovery is reset (as in a process
    that did not prewarm), the median of `times`; each waits for that
    discovery's scan to end, so the pages timed next list every queue."""
    from dashboard.shared import discovery

    took = []
    for _ in range(times):
        reads.reset()
        cold = time.perf_counter()
        page = client.get("/")
        took.append((time.perf_counter() - cold) * 1000)
        assert page.status_code == 200, page.status_code
        deadline = time.monotonic() + 120
        while not discovery.discovery_complete() or not discovery._discovery.found:
            if time.monotonic() > deadline:
                raise SystemExit("discovery did not end in 120 s")
            discovery.known_queues()
            time.sleep(0.05)
    return sorted(took)[len(took) // 2]


def print_fanout(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print()
    print(
        f"Live fan-out: progress of {args.busy_jobs} jobs at {args.rate:.0f} events/s "
        f"for {args.seconds:.0f} s, {args.servers} daphne process(es)"
    )
    head = (
        "clients",
        "events",
        "msgs recv",
        "frames",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "redis/s",
        "dash redis/s",
        "daphne CPU",
        "us/msg",
        "dups",
        "conn retries",
        "gave up",
    )
    widths = (8, 7, 10, 7, 7, 7, 7, 7, 8, 13, 10, 7, 5, 12, 7)
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, widths)))
    for run in runs:
        cells = (
            run["clients"],
            run["events_sent"],
            run["messages_received"],
            run["frames_received"],
            f"{run['delay_p50_ms']:.1f}",
            f"{run['delay_p95_ms']:.1f}",
            f"{run['delay_p99_ms']:.1f}",
            f"{run['delay_max_ms']:.1f}",
            f"{run['redis_calls_per_s']:.0f}",
            f"{run['dashboard_redis_calls_per_s']:.0f}",
            f"{run['daphne_cpu_s']:.1f}s",
            f"{run['daphne_cpu_us_per_message']:.0f}",
            run["duplicates"],
            run["connect_retries"],
            len(run["gave_up"]),
        )
        print(" ".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
    for run in runs:
        per = ", ".join(f"{c:.0f}" for c in run["redis_calls_per_s_by_server"])
        print(f"{run['clients']} clients: Redis calls/s per dashboard process: {per}")
        if run["failed_handshakes"]:
            failures = run["failed_handshakes"]
            print(f"  {len(failures)} handshakes FAILED, e.g. {failures[:3]}")
        if run["gave_up"]:
            gave_up = run["gave_up"]
            print(f"  {len(gave_up)} clients GAVE UP connecting, e.g. {gave_up[:3]}")
    if len(runs) == 2:
        a, b = runs
        calls = b["dashboard_redis_calls_per_s"] / max(
            a["dashboard_redis_calls_per_s"], 1e-9
        )
        delay = b["delay_p99_ms"] / max(a["delay_p99_ms"], 1e-9)
        print(
            f"clients x{b['clients'] / a['clients']:.0f}: dashboard Redis calls/s "
            f"x{calls:.2f}, p99 delay x{delay:.2f}"
        )
        print("top commands at", b["clients"], "clients:", b["commands"])


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
