"""The records-only fleet of `bench/fleet.py --records-only`: N hosts x 8 GPUs
of host and worker heartbeat records, published through
gpu_workers/heartbeat.py's queue_heartbeat and kept live by publishing them
again every heartbeat interval, without running N supervisors and 8N workers
(so that 4,096 GPUs fit a 2-core machine).

    python bench/fleet_records.py --url URL --templates FILE --hosts 512

The records are those a real supervisor and its real GpuWorkers published
for one simulated host (`sim-000`, captured by bench/fleet.py from
bench/fleet_sim.py, in FILE as {"host": {...}, "workers": [{...}, ...]}),
copied per host with the host's name in place of `sim-000`. Each beat, a
share of the GPUs (--busy) is busy with one running job, and each GPU's
utilisation and used memory move (seeded, reproducible): what a fleet under
load shows, and what live updates then send.

Line protocol: prints {"ready": true, "hosts": h, "workers": n,
"beat_s": seconds the first beat took} once every record is live, then
{"beat_s": ...} lines are not printed (stdout stays quiet); a STOP line on
stdin removes nothing (records expire on their own) and exits.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_workers import defaults  # noqa: E402
from gpu_workers.clock import now_ms  # noqa: E402
from gpu_workers.heartbeat import queue_heartbeat  # noqa: E402
from gpu_workers.keys import BullpenKeys  # noqa: E402
from queues.connection import sync_from_url  # noqa: E402

TEMPLATE_HOST = "sim-000"
GiB = 1 << 30
#: Records per pipeline round trip.
BATCH = 256


def host_records(
    templates: dict[str, Any], h: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Host h's records: the templates with its name in place of sim-000."""
    name = f"sim-{h:03d}"
    text = json.dumps(templates).replace(TEMPLATE_HOST, name)
    found = json.loads(text)
    return found["host"], found["workers"]


def vary(worker: dict[str, Any], rng: random.Random, busy: float, beat: int) -> None:
    """One beat of a worker: busy with one job or idle, its GPU's reading."""
    gpu = worker.get("gpu")
    if not isinstance(gpu, dict):
        return
    total = int(gpu.get("memory_total_bytes") or 80 * GiB)
    if rng.random() < busy:
        worker["state"] = "busy"
        worker["running"] = [
            {
                "id": f"{beat}-{rng.randrange(1_000_000)}",
                "name": "noop",
                "declared_bytes": GiB,
                "admitted": True,
                "state": "running",
                "progress": rng.randrange(100),
            }
        ]
        worker["committed_bytes"] = GiB
        gpu["utilization_gpu_pct"] = rng.randrange(40, 101)
        gpu["memory_used_bytes"] = rng.randrange(GiB, total // 2)
    else:
        worker["state"] = "idle"
        worker["running"] = []
        worker["committed_bytes"] = 0
        gpu["utilization_gpu_pct"] = rng.randrange(0, 10)
        gpu["memory_used_bytes"] = rng.randrange(0, GiB)


def publish(
    client: Any,
    keys: BullpenKeys,
    fleet: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    rng: random.Random,
    busy: float,
    beat: int,
    ttl_s: float,
) -> None:
    """Every record once, through queue_heartbeat, BATCH to a round trip."""
    pipe = client.pipeline(transaction=False)
    queued = 0
    for host, workers in fleet:
        host["ts_ms"] = now_ms()
        queue_heartbeat(pipe, keys, "host", host["host"], host, ttl_s)
        for w in workers:
            vary(w, rng, busy, beat)
            w["ts_ms"] = now_ms()
            queue_heartbeat(pipe, keys, "worker", w["id"], w, ttl_s)
        queued += 1 + len(workers)
        if queued >= BATCH:
            pipe.execute()
            queued = 0
    if queued:
        pipe.execute()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--templates", required=True)
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--busy", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--interval-s", type=float, default=defaults.HEARTBEAT_INTERVAL_S
    )
    parser.add_argument("--ttl-s", type=float, default=defaults.HEARTBEAT_TTL_S)
    args = parser.parse_args()
    templates = json.loads(Path(args.templates).read_text())
    fleet = [host_records(templates, h) for h in range(args.hosts)]
    client = sync_from_url(args.url, decode_responses=True)
    keys = BullpenKeys()
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    publish(client, keys, fleet, rng, args.busy, 0, args.ttl_s)
    first = time.perf_counter() - t0
    sys.stdout.write(
        json.dumps(
            {
                "ready": True,
                "hosts": len(fleet),
                "workers": sum(len(w) for _, w in fleet),
                "beat_s": round(first, 3),
            }
        )
        + "\n"
    )
    sys.stdout.flush()
    stop = threading.Event()

    def wait_stop() -> None:
        for line in sys.stdin:
            if line.strip() == "STOP":
                break
        stop.set()

    threading.Thread(target=wait_stop, daemon=True).start()
    beat = 1
    while not stop.wait(args.interval_s):
        publish(client, keys, fleet, rng, args.busy, beat, args.ttl_s)
        beat += 1
    client.close()
    sys.stdout.write(json.dumps({"stopped": True, "beats": beat}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
