"""Redis faults, round after round, under a producer and worker processes:
the long version of tests/faults/test_fault_suite.py.

    .venv/bin/python bench/faults_soak.py [--rounds 5] [--workers 3] [--groups N]

Each round runs every fault of tests/faults/harness.py (SHUTDOWN and restart
with AOF, SIGSTOP beyond the lock duration, CLIENT KILL, maxmemory) and
waits for the queue to drain. With `--groups N` the producer adds grouped
jobs over N groups capped at 2 running each (tests/faults/grouped.py's
recording processor), and the end also checks the group keys. At the end
it prints how many adds were acknowledged, how many of them did not
complete, the worker processes that exited, the producer's refused adds by
error, and the outage lines each worker logged; the exit status is 1 when a
job or a process was lost (or, with groups, the group keys end inconsistent).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from queues import Queue  # noqa: E402
from tests.faults import grouped, harness  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--groups", type=int, default=0, help="0: ungrouped jobs")
    args = parser.parse_args()
    server = harness.aof_server()
    queue = f"soak{uuid.uuid4().hex[:8]}"
    log_dir = Path(tempfile.mkdtemp(prefix="faults-soak-"))
    processor = harness.PROCESSOR
    if args.groups:
        processor = grouped.PROCESSOR
        with Queue(queue, server.url) as q:
            q.set_group_defaults(concurrency=2)
    workers = harness.Workers(server.url, queue, log_dir, args.workers, processor)
    workers.wait_ready(server.url, queue)
    producer = harness.Producer(server.url, queue, groups=args.groups).start()
    began = time.monotonic()
    try:
        for round_no in range(1, args.rounds + 1):
            for name, fault in harness.FAULTS.items():
                admin = redis.Redis.from_url(server.url, decode_responses=True)
                t0 = time.monotonic()
                print(f"{time.strftime('%H:%M:%S')} {name}", flush=True)
                fault(server, admin)
                admin.close()
                time.sleep(1.0)
                harness.settle(server.url, queue, timeout=60)
                print(
                    f"round {round_no}: {name:<24} recovered in "
                    f"{time.monotonic() - t0:5.1f} s",
                    flush=True,
                )
        producer.stop()
        harness.settle(server.url, queue, timeout=60)
        missing = harness.not_completed(server.url, queue, producer.acked)
        with Queue(queue, server.url) as q:
            counts = q.get_counts("active", "failed", "completed")
        exited = workers.exited()
        problems = grouped.group_problems(server.url, queue) if args.groups else []
    finally:
        producer.stop()
        statuses = workers.stop()
        server.stop()
    outage_lines = [
        path.read_text(errors="replace").count("Redis unavailable")
        for path in workers.logs
    ]
    print(f"duration: {time.monotonic() - began:.0f} s, logs in {log_dir}")
    print(f"acknowledged adds: {len(producer.acked)}; not completed: {len(missing)}")
    print(f"final counts: {counts}")
    print(f"worker processes exited during the run: {exited or 'none'}")
    print(f"exit statuses after SIGTERM: {statuses}")
    print(f"producer's refused adds by error: {producer.refusals}")
    print(f"'Redis unavailable' lines per worker: {outage_lines}")
    if args.groups:
        print(f"group keys at the end: {problems or 'consistent'}")
    lost = missing or exited or counts["active"] or any(statuses) or problems
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
