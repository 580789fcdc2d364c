"""The claim's cost against the number of groups (docs/groups.md): one
`move_to_active` script per claim whatever the groups, and its cost flat
from 1 group to 10,000.

    .venv/bin/python bench/groups_claim.py [--claims 2000] [--rounds 3]

For an ungrouped queue and for 1, 100 and 10,000 groups (each group a few
waiting jobs, enough for every claim; every 10th group with a concurrency
cap and every 7th with a rate limit, both set high enough never to block,
so that the claim reads and counts them), it calls the claim script
directly, one job per call, as a worker's claim does
(tests/queues/transitions/helpers.py), `--claims` times on a fresh queue.
It reports the server's own time per call (INFO commandstats, usec_per_call
of EVALSHA, reset before the claims) and the client's wall time per call
(round trip included), the median of `--rounds`, and the ratios against
1 group and against the ungrouped queue. It checks that each claim was one
EVALSHA and nothing else, and says whether the cost is flat (10,000 groups
within 1.5x of 1 group on the server's time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from queues import Queue  # noqa: E402
from queues.devredis import interrupt_on_sigterm  # noqa: E402
from tests.queues.transitions.helpers import move_to_active  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

#: Flat: 10,000 groups' server time per claim within this of 1 group's.
FLAT_RATIO = 1.5
JOBS_PER_GROUP = 3
CHUNK = 1000


def _fill(q: Queue, groups: int, claims: int) -> None:
    """Waiting jobs for `claims` claims: ungrouped (groups == 0) or spread
    over `groups` groups, at least JOBS_PER_GROUP each."""
    per_group = max(JOBS_PER_GROUP, -(-(claims + 10) // max(groups, 1)))
    if groups:
        for i in range(groups):
            if i % 10 == 0:
                q.set_group(f"c{i}", concurrency=1_000_000)
            if i % 7 == 0:
                q.set_group(f"c{i}", rate_max=1_000_000, rate_duration_ms=60_000)
        jobs = [
            {"name": "j", "data": None, "opts": {"group": f"c{i}"}}
            for _ in range(per_group)
            for i in range(groups)
        ]
    else:
        jobs = [{"name": "j", "data": None} for _ in range(claims + 10)]
    for start in range(0, len(jobs), CHUNK):
        q.add_bulk(jobs[start : start + CHUNK])


def measure(url: str, groups: int, claims: int) -> tuple[float, float, float]:
    """(server µs per claim, client µs per claim, Redis commands the script
    ran per claim) on a fresh queue."""
    admin = redis.Redis.from_url(url, decode_responses=True)
    admin.flushall()
    q = Queue(f"claim{uuid.uuid4().hex[:8]}", url)
    try:
        _fill(q, groups, claims)
        move_to_active(q, now=int(time.time() * 1000))  # loads the script
        sent: list[object] = []
        real_send = q.client.execute_command

        def counted(*args: object, **kwargs: object) -> object:
            sent.append(args[0])
            return real_send(*args, **kwargs)

        q.client.execute_command = counted  # type: ignore[method-assign]
        admin.config_resetstat()
        now = int(time.time() * 1000)
        t0 = time.perf_counter()
        for i in range(claims):
            reply = move_to_active(q, now=now + i, seq=i)
            if not reply[0]:
                raise SystemExit(f"{groups} groups: claim {i} found no job")
        wall = time.perf_counter() - t0
        stats = admin.info("commandstats")
    finally:
        q.close()
    evalsha = stats.get("cmdstat_evalsha", {})
    if evalsha.get("calls") != claims or set(map(str, sent)) != {"EVALSHA"}:
        raise SystemExit(f"not one script per claim: {evalsha}, sent {set(sent)}")
    inner = script_commands(stats)
    admin.close()
    return float(evalsha["usec_per_call"]), wall / claims * 1e6, inner / claims


#: INFO commandstats' entries of script calls.
SCRIPT_CALLS = ("cmdstat_evalsha", "cmdstat_fcall", "cmdstat_eval")


def script_commands(stats: dict[str, Any]) -> int:
    """The commands scripts ran, from INFO commandstats reset before them:
    every command but the scripts' calls (EVALSHA, FCALL) and the counting's
    own."""
    own = (*SCRIPT_CALLS, "cmdstat_config|resetstat", "cmdstat_info")
    return sum(v["calls"] for k, v in stats.items() if k not in own)


def script_usec(stats: dict[str, Any]) -> float:
    """Microseconds Redis spent in script calls (FCALL, EVALSHA, EVAL), from
    INFO commandstats reset before them: the scripts' own time, without the
    rest of the server's CPU (event loop, replies, the machine's noise)."""
    return sum(float(stats.get(k, {}).get("usec", 0)) for k in SCRIPT_CALLS)


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    configs = {"ungrouped": 0, "1 group": 1, "100 groups": 100, "10,000 groups": 10_000}
    server = RedisServer().start()
    results: dict[str, tuple[float, float, float]] = {}
    try:
        for label, groups in configs.items():
            rounds = [
                measure(server.url, groups, args.claims) for _ in range(args.rounds)
            ]
            results[label] = (
                statistics.median(r[0] for r in rounds),
                statistics.median(r[1] for r in rounds),
                statistics.median(r[2] for r in rounds),
            )
    finally:
        server.stop()
    one = results["1 group"][0]
    plain = results["ungrouped"][0]
    print(
        f"{args.claims} claims per run, median of {args.rounds} runs, one EVALSHA each"
    )
    print(
        f"{'':<15}{'server µs/claim':>16}{'client µs/claim':>16}"
        f"{'cmds/claim':>11}{'vs 1 group':>12}{'vs ungrouped':>14}"
    )
    for label, (server_us, client_us, cmds) in results.items():
        print(
            f"{label:<15}{server_us:>16.1f}{client_us:>16.1f}{cmds:>11.1f}"
            f"{server_us / one:>12.2f}{server_us / plain:>14.2f}"
        )
    ratio = results["10,000 groups"][0] / one
    flat = ratio <= FLAT_RATIO
    verdict = "flat" if flat else "NOT flat"
    print(
        f"10,000 groups / 1 group = {ratio:.2f} on the server's time: {verdict} "
        f"(flat: within {FLAT_RATIO}x)"
    )
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
