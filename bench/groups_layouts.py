"""What taking grouped jobs would cost Redis in other layouts, before anyone
rebuilds the groups for it (docs/groups.md, *What turns cost*; issue 25's
throughput goal): instructions per job under callgrind, pops only.

    .venv/bin/python bench/groups_layouts.py [--jobs 5000] [--groups 1 100 10000]
        [--real [--rounds 5]]

Each layout is a small Lua script that takes up to 50 jobs per call into an
`active` list, the way a claim at concurrency 50 does, and nothing else of a
claim (the job's hash, lock and event are the same in every layout, so they
are left out): the figure is the pop's own cost, beside RPOPLPUSH of
ungrouped jobs from `wait` (what BullMQ's claim does).

  heads   one zset per group (the group's waiting jobs, as today) and one
          zset holding each ready group's head job, scored by its turn: a
          claim pops the heads, then refills each group's head from the
          group's zset (an empty reply shows the group emptied: no ZCARD).
          The heads' zset carries a 65-byte pin so that it is a skiplist
          (as a listpack of about 100 entries each insert walks it).
  tags    one zset of every grouped waiting job scored by its group's turn,
          reckoned when it is added (start-time fair queuing: a group's next
          job goes one turn, 1/weight, after its last, never before the turn
          being served): a claim is one ZPOPMIN of up to 50 jobs, whatever
          the groups.
  +counts the same, plus each group's running count read and written once
          per call (HMGET + HSET of a pinned hash): what per-group
          concurrency caps need.

The jobs are spread evenly over --groups groups and added before counting
(adds are not counted). Figures are deterministic to about 0.2 %, like
`bench/groups_instructions.py`, whose redis-server under callgrind this
reuses. `--real` runs the same scripts on a plain redis-server instead and
prints the time Redis spent in them per job (INFO commandstats, median of
--rounds, each round measuring every layout once in turn): the memory
behaviour that callgrind's instruction counts leave out (at 10,000 groups
the present layout's real time grows more than its instructions do). What
the layouts leave out (limits, pauses, reasons, listing) is in
docs/groups.md; this only says whether the pop itself fits the goal.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from groups_claim import script_usec  # noqa: E402
from groups_instructions import callgrind_redis, control, dumped_total  # noqa: E402

from tests.redis_server import RedisServer  # noqa: E402

BATCH = 50
UNGROUPED_LABEL = "ungrouped (RPOPLPUSH)"
PIN = "~" * 65

UNGROUPED = """
local taken = 0
for _ = 1, tonumber(ARGV[1]) do
  if not redis.call('RPOPLPUSH', KEYS[1], KEYS[2]) then break end
  taken = taken + 1
end
return taken
"""

# Counts (ARGV[2] == '1'): the groups' running counts in KEYS[3].
COUNTS = """
local function countRunning(key, gids)
  local seen, order = {}, {}
  for i = 1, #gids do
    local gid = gids[i]
    if not seen[gid] then
      seen[gid] = 0
      order[#order + 1] = gid
    end
    seen[gid] = seen[gid] + 1
  end
  local now = redis.call('HMGET', key, unpack(order))
  local writes = {}
  for i = 1, #order do
    writes[#writes + 1] = order[i]
    writes[#writes + 1] = (tonumber(now[i]) or 0) + seen[order[i]]
  end
  redis.call('HSET', key, unpack(writes))
end
"""

# KEYS: heads, active, running. A job id is "<group>:<n>".
HEADS = (
    COUNTS
    + """
local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[1]))
local taken, gids, adds = {}, {}, {}
for i = 1, #popped, 2 do
  local id = popped[i]
  if id == ARGV[3] then
    adds[#adds + 1] = 'inf'
    adds[#adds + 1] = id
  else
    local gid = string.match(id, '^(.-):')
    taken[#taken + 1] = id
    gids[#gids + 1] = gid
    local nxt = redis.call('ZPOPMIN', 'G:' .. gid)
    if nxt[1] then
      adds[#adds + 1] = popped[i + 1] + 1
      adds[#adds + 1] = nxt[1]
    end
  end
end
if #taken > 0 then redis.call('LPUSH', KEYS[2], unpack(taken)) end
if #adds > 0 then redis.call('ZADD', KEYS[1], unpack(adds)) end
if ARGV[2] == '1' and #gids > 0 then countRunning(KEYS[3], gids) end
return #taken
"""
)

# KEYS: tags, active, running; ARGV as HEADS' (the pin unused).
TAGS = (
    COUNTS
    + """
local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[1]))
local taken, gids = {}, {}
for i = 1, #popped, 2 do
  taken[#taken + 1] = popped[i]
  gids[#gids + 1] = string.match(popped[i], '^(.-):')
end
if #taken > 0 then redis.call('LPUSH', KEYS[2], unpack(taken)) end
if ARGV[2] == '1' and #gids > 0 then countRunning(KEYS[3], gids) end
return #taken
"""
)


def spread(jobs: int, groups: int) -> list[list[str]]:
    """Each group's job ids, in its order."""
    per = max(1, jobs // groups)
    return [[f"g{g}:{k}" for k in range(per)] for g in range(groups)]


def load_heads(pipe: Any, ids: list[list[str]]) -> None:
    """Each group's first job in the heads' pinned zset `H` (turn 0), the
    rest in the group's own zset `G:<group>`."""
    pipe.zadd("H", {PIN: float("inf")})
    for group in ids:
        pipe.zadd("H", {group[0]: 0})
        if len(group) > 1:
            gid = group[0].split(":")[0]
            pipe.zadd(f"G:{gid}", {j: n for n, j in enumerate(group[1:])})


def load_tags(pipe: Any, ids: list[list[str]]) -> None:
    """Every job in `H`, the tag of a group's n-th job n: with equal weights
    the turns interleave the groups, as an add reckons them."""
    for group in ids:
        pipe.zadd("H", {j: n for n, j in enumerate(group)})


def drain(run: Callable[[], Any], jobs: int) -> None:
    """Claim every job, BATCH at a time."""
    done = 0
    while done < jobs:
        got = int(run())
        if got == 0:
            raise SystemExit(f"a claim found nothing after {done} of {jobs} jobs")
        done += got


#: Measures what claiming `jobs` costs Redis per job: (the claims, jobs).
Meter = Callable[[Callable[[], Any], int], float]


def callgrind_meter(pid: int, folder: str) -> Meter:
    """Instructions per job under callgrind."""

    def meter(run: Callable[[], Any], jobs: int) -> float:
        control(pid, "-z")
        drain(run, jobs)
        return dumped_total(folder, pid) / jobs

    return meter


def real_meter(r: redis.Redis) -> Meter:
    """Microseconds Redis spent in the scripts per job (INFO commandstats)."""

    def meter(run: Callable[[], Any], jobs: int) -> float:
        r.config_resetstat()
        drain(run, jobs)
        return script_usec(r.info("commandstats")) / jobs

    return meter


def measure(r: redis.Redis, meter: Meter, args: argparse.Namespace) -> dict[str, float]:
    """One pass over every layout: the meter's figure per job, by label."""
    figures: dict[str, float] = {}
    ungrouped = r.register_script(UNGROUPED)
    r.flushall()
    r.rpush("wait", *[f"j{i}" for i in range(args.jobs)])
    ungrouped(keys=["wait", "active"], args=[0])  # loaded outside the count
    figures[UNGROUPED_LABEL] = meter(
        lambda: ungrouped(keys=["wait", "active"], args=[BATCH]), args.jobs
    )
    layouts = {
        "heads": (r.register_script(HEADS), load_heads),
        "tags": (r.register_script(TAGS), load_tags),
    }
    keys = ["H", "active", "running"]
    for groups in args.groups:
        ids = spread(args.jobs, groups)
        total = sum(len(g) for g in ids)
        for counts in ("0", "1"):
            for name, (script, load) in layouts.items():
                r.flushall()
                pipe = r.pipeline(transaction=False)
                pipe.hset("running", PIN, 0)
                load(pipe, ids)
                pipe.execute()
                script(keys=keys, args=[0, counts, PIN])  # loaded outside
                more = " +counts" if counts == "1" else ""
                figures[f"{name}{more}, {groups:,} groups"] = meter(
                    lambda s=script, c=counts: s(keys=keys, args=[BATCH, c, PIN]),
                    total,
                )
    return figures


def report(title: str, unit: str, passes: list[dict[str, float]], fmt: str) -> None:
    """Each label's median over the passes, and beyond the ungrouped pop."""
    med = {k: statistics.median(p[k] for p in passes) for k in passes[0]}
    base = med[UNGROUPED_LABEL]
    print(title)
    print(f"{'':<28}{unit:>18}{'beyond RPOPLPUSH':>18}")
    for label, per_job in med.items():
        spread_ = ""
        if len(passes) > 1:
            lo, hi = min(p[label] for p in passes), max(p[label] for p in passes)
            spread_ = f"  [{lo:{fmt}}-{hi:{fmt}}]"
        print(f"{label:<28}{per_job:>18{fmt}}{per_job - base:>18{fmt}}{spread_}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 100, 10_000])
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.real:
        server = RedisServer().start()
        try:
            r = redis.Redis.from_url(server.url)
            passes = [measure(r, real_meter(r), args) for _ in range(args.rounds)]
        finally:
            server.stop()
        report(
            f"claims of {BATCH}, pops only, plain redis-server, median of "
            f"{args.rounds} [range]",
            "script us/job",
            passes,
            ",.2f",
        )
        return 0
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        print("needs valgrind (apt install valgrind)", file=sys.stderr)
        return 2
    with callgrind_redis() as (url, pid, folder):
        r = redis.Redis.from_url(url)
        figures = measure(r, callgrind_meter(pid, folder), args)
    report(
        f"claims of {BATCH}, pops only, redis-server under callgrind",
        "instructions/job",
        [figures],
        ",.0f",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
