"""What grouped jobs hold in Redis (docs/groups.md, *What groups hold in
Redis*): memory per waiting job, ungrouped against spread over groups, and
what groups leave once their customers have come and gone.

    .venv/bin/python bench/groups_memory.py [--jobs 20000] [--churn 20000]

One throwaway redis-server. For each spread (ungrouped; 1 and 100 groups;
2 jobs a group; 1 job a group) on a flushed database, --jobs jobs with a
small payload are added in bulks of 1,000 and INFO memory's `used_memory`
before and after gives the bytes per waiting job (the keys' own
`MEMORY USAGE` at 1 group says where they go). Then --churn customers with
one job each come while a worker at concurrency 50 takes their jobs, the
backlog kept near 500: the groups listed while it runs (sampled at every
add) and once it has drained are what forgetting leaves behind (before
2026-12-06: about half of every customer seen, for good).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fairness import wait_done, worker  # noqa: E402
from groups_instructions import add_jobs  # noqa: E402

from queues import Queue  # noqa: E402
from queues.devredis import interrupt_on_sigterm  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

DATA = {"prompt": "a watercolour fox in the snow, 1024x1024"}


def per_job(r: redis.Redis, url: str, groups: int, jobs: int) -> float:
    """Bytes of Redis memory per waiting job, the jobs over `groups`."""
    r.flushall()
    before = int(r.info("memory")["used_memory"])
    with Queue(f"mem-{groups}", connection=url) as q:
        add_jobs(q, groups, jobs, DATA)
    return (int(r.info("memory")["used_memory"]) - before) / jobs


def where(r: redis.Redis, jobs: int) -> list[str]:
    """The queue's keys other than jobs' by bytes per job (1 group)."""
    prefix = "bull:mem-1:"
    rows = []
    for key in r.scan_iter(prefix + "*", count=1000):
        name = key[len(prefix) :]
        if name.split(":")[0].isdigit():
            continue
        rows.append((int(r.memory_usage(key, samples=0) or 0), name))
    return [f"{name} {size / jobs:.0f}" for size, name in sorted(rows, reverse=True)]


def churn(r: redis.Redis, url: str, customers: int) -> tuple[int, int, int]:
    """One-job customers coming while a worker takes them: the most groups
    listed at once (sampled at every add), the backlog at that moment, and
    the groups left listed once drained."""
    r.flushall()
    q = Queue("mem-churn", connection=url)
    added, most, backlog = 0, 0, 0
    with worker(url, q.name, 50):
        while added < customers:
            waiting = q.get_counts("waiting")["waiting"]
            groups = q.count_groups()
            if groups > most:
                most, backlog = groups, waiting
            if waiting < 500:
                n = min(100, customers - added)
                q.add_bulk(
                    [
                        {"name": "noop", "data": None, "opts": {"group": f"c{i}"}}
                        for i in range(added, added + n)
                    ]
                )
                added += n
            else:
                time.sleep(0.005)
        wait_done(q, customers)
        drained = q.count_groups()
    q.close()
    return most, backlog, drained


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--churn", type=int, default=20_000)
    args = parser.parse_args()
    server = RedisServer().start()
    try:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        print(f"redis {r.info('server')['redis_version']}, {args.jobs} waiting jobs")
        plain = per_job(r, server.url, 0, args.jobs)
        print(f"{'ungrouped':<22}{plain:>7.0f} B/job")
        spreads = {
            "1 group": 1,
            "100 groups": 100,
            "2 jobs a group": args.jobs // 2,
            "1 job a group": args.jobs,
        }
        for label, groups in spreads.items():
            size = per_job(r, server.url, groups, args.jobs)
            print(f"{label:<22}{size:>7.0f} B/job  {size / plain:.2f}x")
            if groups == 1:
                print("    B/job by key: " + ", ".join(where(r, args.jobs)))
        most, backlog, drained = churn(r, server.url, args.churn)
        print(
            f"{args.churn} one-job customers under load: at most {most} groups "
            f"listed at once (with {backlog} jobs waiting), {drained} once drained"
        )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
