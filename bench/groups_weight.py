"""How long a weight change on a grouped backlog holds Redis (docs/groups.md,
*Weights*): the default weight set to 2 and back to 1 with --jobs grouped
jobs waiting, spread over 1, 100 and 10,000 groups.

    .venv/bin/python bench/groups_weight.py [--jobs 100000]

One throwaway redis-server. For each spread, on a flushed database, the jobs
are added in bulks of 1,000, then `set_group_defaults(weight=2)` and
`set_group_defaults(weight=1)` (a weight that packs the backlog into fewer
turns, then one that spreads it): the wall time of each, the script calls
it made (INFO commandstats) and the longest of them (SLOWLOG, calls over
1 ms): while one runs, Redis serves nobody else. Before 2026-12-06 each
change was one call over the whole backlog (296 ms at 100 groups and 562 ms
at 10,000 with 100,000 waiting; at a million, past Redis's busy-script
limit).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from groups_instructions import add_jobs  # noqa: E402

from queues import Queue  # noqa: E402
from queues.devredis import interrupt_on_sigterm  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

SCRIPT_CALLS = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall")


def script_calls(r: redis.Redis) -> int:
    stats = r.info("commandstats")
    return sum(int(stats[name]["calls"]) for name in SCRIPT_CALLS if name in stats)


def change(r: redis.Redis, q: Queue, weight: int) -> tuple[float, int, float]:
    """Set the default weight: wall ms, script calls, longest call in ms."""
    r.slowlog_reset()
    calls = script_calls(r)
    start = time.perf_counter()
    q.set_group_defaults(weight=weight)
    wall = (time.perf_counter() - start) * 1000
    calls = script_calls(r) - calls
    longest = 0.0
    for entry in r.slowlog_get(1000):
        name = entry["command"].split(b" ", 1)[0].upper()  # (bytes here)
        if name in (b"EVALSHA", b"EVAL", b"FCALL"):
            longest = max(longest, entry["duration"] / 1000)
    return wall, calls, longest


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    args = parser.parse_args()
    server = RedisServer().start()
    try:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        r.config_set("slowlog-log-slower-than", 1000)
        r.config_set("slowlog-max-len", 1000)
        version = r.info("server")["redis_version"]
        print(f"redis {version}, {args.jobs} grouped jobs waiting")
        head = ("spread", "weight", "wall ms", "calls", "longest call ms")
        print("{:<14}{:>7}{:>10}{:>7}{:>17}".format(*head))
        for groups in (1, 100, 10_000):
            r.flushall()
            with Queue(f"weight-{groups}", connection=server.url) as q:
                add_jobs(q, groups, args.jobs)
                for weight in (2, 1):
                    wall, calls, longest = change(r, q, weight)
                    label = f"{groups} group" + ("s" if groups > 1 else "")
                    print(
                        f"{label:<14}{weight:>7}{wall:>10.0f}{calls:>7}{longest:>17.1f}"
                    )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
