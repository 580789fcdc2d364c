"""Where a claim's and a finish's Lua goes, line by line: how many times each
line of move_to_active and move_to_finished runs per job, ungrouped or over N
groups, claimed and finished in batches as a worker at concurrency 50 does.

    PATH=/dir/of/a/debug/redis-server:$PATH \\
        .venv/bin/python bench/lua_lines.py [--groups 0 1 100] [--jobs 2000] [--top 40]

What it is for: in Redis's Lua each line a job runs costs it hundreds of
instructions (a function call, a table made, a string made), and callgrind
sees only the interpreter, not which line of a script it runs.
`bench/groups_instructions.py` says how much a job costs; this says where in
the scripts. Lines, not time: a line that calls Redis costs more than one that
does not.

It needs a redis-server whose EVAL keeps Lua's `debug` library, which stock
Redis removes. Build one (a few minutes; never install it): `apt-get source
redis` (Debian's deb-src), delete the line `"debug = nil\\n"` in the error
handler of src/eval.c, `make MALLOC=libc`, and put src/ first on PATH. The
scripts go as EVALSHA with a line hook put before their first line; each line
event is counted in a hash of the throwaway server's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groups_instructions import add_jobs, finish_entry  # noqa: E402

from queues import Queue  # noqa: E402
from queues import scripts as lua_scripts  # noqa: E402
from queues.devredis import interrupt_on_sigterm  # noqa: E402
from tests.queues.transitions.helpers import (  # noqa: E402
    claimed,
    move_to_active,
    move_to_finished,
)
from tests.redis_server import RedisServer  # noqa: E402

SCRIPTS = ("move_to_active", "move_to_finished")
COUNTS = "lua-lines"
#: Put before a script's first line (the same line, so numbers stay): every
#: line the script runs adds one to its count.
HOOK = (
    'debug.sethook(function(_, line) redis.call("HINCRBY", "' + COUNTS + '", line, 1) '
    'end, "l"); '
)


def hooked_texts() -> dict[str, str]:
    """Make the two scripts run with the hook (the texts as Redis gets them,
    cached by LuaDir.source, before any Queue loads them); their own texts."""
    own = {}
    for name in SCRIPTS:
        own[name] = lua_scripts.QUEUE_LUA.source(name)
        lua_scripts.QUEUE_LUA._sources[name] = HOOK + own[name]  # noqa: SLF001
    return own


def take_counts(r: redis.Redis, name: str, into: dict[tuple[str, int], int]) -> None:
    for line, n in r.hgetall(COUNTS).items():
        key = (name, int(line))
        into[key] = into.get(key, 0) + int(n)
    r.delete(COUNTS)


def measure(url: str, groups: int, jobs: int, batch: int) -> tuple[int, dict[Any, int]]:
    """(jobs done, runs per (script, line)) over `groups` groups (0: none)."""
    r = redis.Redis.from_url(url, decode_responses=True)
    r.flushall()
    q = Queue(f"lines{groups}", url)
    added = len(add_jobs(q, groups, jobs))
    move_to_active(q, count=0)  # loads the scripts
    r.delete(COUNTS)
    counts: dict[Any, int] = {}
    done = 0
    while done < added:
        got = claimed(move_to_active(q, count=batch, seq=done))
        if not got:
            raise SystemExit(
                f"{groups} groups: a claim found nothing after {done} jobs"
            )
        take_counts(r, "move_to_active", counts)
        entries = [finish_entry(q, job, None) for job in got]
        codes = move_to_finished(q, entries)[0]
        if any(code != 0 for code in codes):
            raise SystemExit(f"{groups} groups: finish codes {codes}")
        take_counts(r, "move_to_finished", counts)
        done += len(got)
    q.obliterate(force=True)
    q.close()
    r.close()
    return done, counts


def main() -> int:
    interrupt_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[0, 1, 100])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument(
        "--batch", type=int, default=50, help="jobs per claim and finish"
    )
    parser.add_argument("--top", type=int, default=40, help="lines listed per config")
    args = parser.parse_args()
    own = hooked_texts()
    server = RedisServer().start()
    try:
        probe = redis.Redis.from_url(server.url, decode_responses=True)
        try:
            found = probe.eval("return type(debug)", 0)
        except redis.ResponseError:  # stock Redis: no such global
            found = None
        if found != "table":
            print(
                "this redis-server's EVAL has no `debug` library: build one as the"
                " docstring says and put it first on PATH",
                file=sys.stderr,
            )
            return 2
        for groups in args.groups:
            done, counts = measure(server.url, groups, args.jobs, args.batch)
            per = {
                name: sum(n for (s, _), n in counts.items() if s == name) / done
                for name in SCRIPTS
            }
            what = f"{groups:,} groups" if groups else "ungrouped"
            print(
                f"\n{what}, {done} jobs in batches of {args.batch}: lines run per job: "
                + ", ".join(f"{name} {n:.1f}" for name, n in per.items())
            )
            top = sorted(counts.items(), key=lambda kv: -kv[1])[: args.top]
            for (name, line), n in top:
                text = own[name].split("\n")[line - 1].strip()
                print(f"{n / done:8.2f}  {name:<16} {line:5d}  {text[:80]}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
