"""Bullpen's throughput over several queues, on one Redis or a Redis Cluster
(bench/throughput.py `--queues N`, `--redis redis+cluster://...`,
`--compare-cluster`).

The workload: --jobs no-op jobs split evenly over N queues named `{tp0}`,
`{tp1}`, ... (the braces are a hash tag: each queue's keys share one slot,
so on a cluster each queue lives whole on one primary; docs/protocol.md §1.1
and docs/scaling.md), bulk-added, then processed by ONE worker process per
queue (bench/bullpen_worker.py, async no-op processor, --concurrency each),
all started together. jobs/s runs from the first job's processedOn to the
last job's finishedOn over all queues, read back from Redis. Redis CPU is
the sum of `used_cpu_user + used_cpu_sys` (INFO) over every primary.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from throughput_libs import (  # noqa: E402
    PREFIX,
    BenchError,
    Budget,
    Bullpen,
    job_fields,
    wait_finished,
)

from queues.cluster import is_cluster_client  # noqa: E402
from queues.connection import sync_from_url  # noqa: E402
from queues.devredis import RedisClusterSet, RedisServer  # noqa: E402


def queue_names(n: int) -> list[str]:
    """`{tp0}`..`{tp<n-1>}`: with 3 primaries made by `redis-cli --cluster
    create` (slots split evenly), tp0..tp3 fall on all three."""
    return [f"{{tp{i}}}" for i in range(n)]


def node_of(client: Any, queue: str) -> str:
    """host:port of the node holding the queue's slot (the only node, off a cluster)."""
    key = f"{PREFIX}:{queue}:wait"
    if is_cluster_client(client):
        return str(client.get_node_from_key(key).name)
    kw = client.connection_pool.connection_kwargs
    return f"{kw.get('host')}:{kw.get('port')}"


def server_counters(client: Any) -> dict[str, float]:
    """CPU seconds and commands processed, summed over every primary."""
    if is_cluster_client(client):
        per_node = client.info(target_nodes=client.PRIMARIES)
        infos = list(per_node.values())
    else:
        infos = [client.info()]
    return {
        "cpu_s": sum(
            float(i["used_cpu_user"]) + float(i["used_cpu_sys"]) for i in infos
        ),
        "commands": float(sum(int(i["total_commands_processed"]) for i in infos)),
        "nodes": float(len(infos)),
    }


def flush(client: Any) -> None:
    """Empty every primary."""
    if is_cluster_client(client):
        client.flushall(target_nodes=client.PRIMARIES)
    else:
        client.flushdb()


def measure_queues(
    url: str, n_queues: int, jobs: int, concurrency: int, budget: Budget
) -> dict[str, Any]:
    """One run of the workload (see the module docstring) on `url`."""
    client = sync_from_url(url, decode_responses=True)
    lib = Bullpen(url)
    queues = queue_names(n_queues)
    per_queue = [
        jobs // n_queues + (1 if i < jobs % n_queues else 0) for i in range(n_queues)
    ]
    try:
        add_s = sum(
            lib.bulk_add(q, n, budget) for q, n in zip(queues, per_queue, strict=True)
        )
        workers = [lib.worker(q, concurrency, "noop") for q in queues]
        replies: list[dict[str, Any]] = []
        try:
            for w in workers:
                w.read_json(budget.cap(30))  # READY
            before = server_counters(client)
            for w in workers:
                w.send("GO")
            done = sum(
                wait_finished(client, q, n, budget.cap(120))
                for q, n in zip(queues, per_queue, strict=True)
            )
            after = server_counters(client)
            for w in workers:
                w.send("STOP")
            for w in workers:
                replies.append(w.read_json(budget.cap(20)))
                w.finish(20)
        finally:
            for w in workers:
                w.kill()
        processed: list[int] = []
        finished: list[int] = []
        for q in queues:
            for p, f in job_fields(client, q, ("processedOn", "finishedOn")):
                if p and f:
                    processed.append(int(p))
                    finished.append(int(f))
        if not processed:
            raise BenchError(f"{url}: no job completed")
        span_ms = max(max(finished) - min(processed), 1)
        completed = len(processed)
        return {
            "queues": {q: node_of(client, q) for q in queues},
            "jobs": jobs,
            "completed": completed,
            "timed_out": done < jobs,
            "bulk_add_jobs_per_s": jobs / add_s,
            "span_ms": span_ms,
            "jobs_per_s": completed / (span_ms / 1000),
            "worker_cpu_us_per_job": sum(int(r["cpu_us"]) for r in replies)
            / max(completed, 1),
            "redis_cpu_us_per_job": (after["cpu_s"] - before["cpu_s"])
            * 1e6
            / max(completed, 1),
            "redis_commands_per_job": (after["commands"] - before["commands"])
            / max(completed, 1),
            "primaries": int(after["nodes"]),
        }
    finally:
        client.close()


def describe(label: str, m: dict[str, Any]) -> str:
    return (
        f"  {label:<8} {m['jobs_per_s']:>9,.0f} jobs/s  "
        f"bulk add {m['bulk_add_jobs_per_s']:>8,.0f}/s  "
        f"worker {m['worker_cpu_us_per_job']:>5.0f} us/job  "
        f"redis {m['redis_cpu_us_per_job']:>5.0f} us/job over {m['primaries']} "
        f"primar{'y' if m['primaries'] == 1 else 'ies'}  "
        f"{m['redis_commands_per_job']:.1f} cmds/job"
        + ("  (TIMED OUT)" if m["timed_out"] else "")
    )


def print_placement(m: dict[str, Any]) -> None:
    for q, node in m["queues"].items():
        print(f"    queue {q} -> {node}")


def cores_note(ratio: bool = True) -> str:
    cpus = os.cpu_count() or 0
    return (
        f"{cpus} CPU cores on this machine: every redis-server, the "
        "worker processes and this script share them"
        + (
            ", so a cluster's primaries compete for the same cores and the "
            "ratio shows a cluster's overhead, not the gain of separate machines"
            if cpus < 8 and ratio
            else ""
        )
    )


def write_json(result: dict[str, Any], output: str | None, name: str) -> None:
    path = Path(output) if output else BENCH / "results" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def run_on(args: argparse.Namespace) -> int:
    """--queues N (and/or a cluster --redis): Bullpen only, on one server."""
    budget = Budget(args.budget_s)
    server = None if args.redis else RedisServer().start()
    url = args.redis or server.url  # type: ignore[union-attr]
    started = datetime.now(UTC)
    try:
        client = sync_from_url(url, decode_responses=True)
        flush(client)
        client.close()
        print(cores_note(ratio=False))
        m = measure_queues(url, args.queues, args.jobs, args.concurrency, budget)
    finally:
        if server is not None:
            server.stop()
    print(
        f"Bullpen, {args.jobs} no-op jobs over {args.queues} queue(s), one worker "
        f"process per queue at concurrency {args.concurrency}:"
    )
    print_placement(m)
    print(describe("run", m))
    write_json(
        {"started": started.isoformat(), "url": url, "cpus": os.cpu_count(), "run": m},
        args.output,
        f"throughput-queues-{started.strftime('%Y%m%d%H%M%S')}.json",
    )
    return 0


def compare_cluster(args: argparse.Namespace) -> int:
    """--compare-cluster: the same workload on a 3-primary cluster and on one
    node, both started here, interleaved round by round; best round each."""
    budget = Budget(args.budget_s)
    started = datetime.now(UTC)
    print(cores_note(), flush=True)
    cluster = RedisClusterSet(primaries=3).start()
    single = RedisServer().start()
    runs: dict[str, list[dict[str, Any]]] = {"single": [], "cluster": []}
    notes: list[str] = []
    try:
        urls = {"single": single.url, "cluster": cluster.url}
        for round_no in range(args.rounds):
            order = (
                ["single", "cluster"] if round_no % 2 == 0 else ["cluster", "single"]
            )
            for label in order:
                print(
                    f"  round {round_no + 1}/{args.rounds}, {label}: {args.jobs} jobs "
                    f"over {args.queues} queues ...",
                    file=sys.stderr,
                    flush=True,
                )
                try:
                    runs[label].append(
                        measure_queues(
                            urls[label],
                            args.queues,
                            args.jobs,
                            args.concurrency,
                            budget,
                        )
                    )
                except BenchError as exc:
                    notes.append(f"{label} round {round_no + 1}: {exc}")
                finally:
                    if label == "cluster":
                        cluster.flushall()
                    else:
                        c = sync_from_url(single.url)
                        c.flushall()
                        c.close()
    finally:
        cluster.stop()
        single.stop()
    best = {k: max(v, key=lambda m: m["jobs_per_s"]) for k, v in runs.items() if v}
    print()
    print(
        f"Bullpen, {args.jobs} no-op jobs over {args.queues} queues, one worker "
        f"process per queue at concurrency {args.concurrency}, best of {args.rounds}; "
        f"Python {platform.python_version()}, {os.cpu_count()} CPU cores"
    )
    for label in ("single", "cluster"):
        if label in best:
            print_placement(best[label])
            print(describe(label, best[label]))
    ratio = None
    if len(best) == 2:
        ratio = best["cluster"]["jobs_per_s"] / best["single"]["jobs_per_s"]
        print(f"ratio cluster/single (jobs/s): {ratio:.2f}")
    print("note: " + cores_note())
    for note in notes:
        print("note: " + note.splitlines()[0])
    write_json(
        {
            "started": started.isoformat(),
            "cpus": os.cpu_count(),
            "config": {
                "jobs": args.jobs,
                "queues": args.queues,
                "concurrency": args.concurrency,
                "rounds": args.rounds,
            },
            "rounds": runs,
            "best": best,
            "ratio_cluster_over_single": ratio,
            "notes": notes,
        },
        args.output,
        f"throughput-cluster-{started.strftime('%Y%m%d%H%M%S')}.json",
    )
    return 0 if ratio is not None else 1
