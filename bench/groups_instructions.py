"""What a grouped job costs Redis against an ungrouped one, in instructions
(docs/groups.md, issue 25's throughput goal), steady on a noisy machine.

    .venv/bin/python bench/groups_instructions.py [--jobs 2000] [--groups 0 1 100 2000]
        [--batch 50] [--fetch | --chain] [--evalsha] [--history] [--cache]
        [--keep DIR]
    .venv/bin/python bench/groups_instructions.py --real [--jobs 10000] [--rounds 5]
        [--groups 1 100 10000]

One throwaway redis-server runs under valgrind's callgrind (Debian's
`valgrind`; about 30x slower, so a few thousand jobs). For each configuration
(0: ungrouped; N: the jobs spread over N groups) on a flushed database, the
jobs are added, then claimed 50 at a time and finished 50 at a time, as a
worker at concurrency 50 does (tests/queues/transitions/helpers.py). Only the
claims and finishes are counted (`callgrind_control -z` before, `-d` after).
`--batch N` claims and finishes N at a time instead; `--fetch` finishes N
at a time, each call fetching the next N, as a worker does (its claims after
the first saying `leased`); `--chain` is `--fetch --batch 1`, a worker at
concurrency 1 (one script call per job: what each call costs Redis to set up
counts whole). `--history` gives each finish the attempt record a worker's attempt
history attaches (queues/attempts.py), as every Bullpen worker does by
default. The calls go as workers send them on Redis 7 (FCALL of each
script's function library, queues/luafunctions.py); `--evalsha` sends
them as EVALSHA instead. It prints instructions per job, the Redis commands
the scripts ran per job, and the ratio against the ungrouped figure of the
same run; repeatable to about 0.2 %, where jobs/s on this VM move by a
third from second to second.
Instructions leave out cache misses, which add to 10,000 groups' cost;
`--cache` simulates the caches (about twice as slow) and prints estimated
cycles instead: instructions + 10 per L1 miss + 100 per last-level miss.

`--real` measures time instead, on a plain redis-server: for each --groups
N, an ungrouped queue and a queue of the same jobs over N groups are claimed
and finished 50 at a time, taking turns every 4 calls of each, and the time
Redis spent in their scripts (INFO commandstats, reset before each queue's
turn) is summed per queue: grouped / ungrouped, median of --rounds. Taking
turns that often, both queues meet the same noise: runs of one then the other
(bench/fairness.py's rounds) moved by 15 % on this VM, this by 3 %. Memory
behaviour (cache misses, the allocator) counts here, as in production.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groups_claim import script_commands, script_usec  # noqa: E402

from queues import AttemptHistory, Job, Queue  # noqa: E402
from queues.attempts import AttemptRecorder  # noqa: E402
from queues.hotpath import sync_adds  # noqa: E402
from queues.ops import Eval  # noqa: E402
from tests.queues.transitions.helpers import (  # noqa: E402
    claimed,
    entry,
    move_to_active,
    move_to_finished,
)
from tests.redis_server import RedisServer, find_redis_server, free_port  # noqa: E402

BATCH = 50


def control(pid: int, flag: str) -> None:
    subprocess.run(
        ["callgrind_control", flag, str(pid)], capture_output=True, check=True
    )


def dumped_total(folder: str, pid: int) -> int:
    """The instruction total of the newest dump (since the last zeroing), or
    under --cache its estimated cycles: instructions + 10 per L1 miss + 100
    per last-level miss (callgrind_annotate's and KCachegrind's estimate)."""
    control(pid, "-d")
    newest = max(glob.glob(f"{folder}/cg.out.*"), key=lambda p: Path(p).stat().st_mtime)
    for line in Path(newest).read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            events = [int(n) for n in line.split()[1:]]
            if len(events) < 9:
                return events[0]
            # Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
            return events[0] + 10 * sum(events[3:6]) + 100 * sum(events[6:9])
    raise SystemExit(f"no totals in {newest}")


@contextlib.contextmanager
def callgrind_redis(
    keep: str | None = None, cache: bool = False
) -> Iterator[tuple[str, int, str]]:
    """A throwaway redis-server under callgrind (no persistence, a free
    port): its URL, pid and the folder of its dumps (`keep`, else a
    temporary one). `cache`: with callgrind's cache simulation."""
    port = free_port()
    with contextlib.ExitStack() as stack:
        folder = keep or stack.enter_context(tempfile.TemporaryDirectory())
        Path(folder).mkdir(parents=True, exist_ok=True)
        server = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                *(["--cache-sim=yes"] if cache else []),
                f"--callgrind-out-file={folder}/cg.out",
                find_redis_server(),
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    redis.Redis.from_url(url).ping()
                    break
                except redis.ConnectionError as exc:
                    if time.monotonic() > deadline:
                        raise SystemExit(
                            "redis-server under callgrind did not start"
                        ) from exc
                    time.sleep(0.2)
            yield url, server.pid, folder
        finally:
            server.terminate()
            server.wait(30)


def measure(
    url: str,
    pid: int,
    folder: str,
    groups: int,
    jobs: int,
    batch: int = BATCH,
    chain: int = 0,
    evalsha: bool = False,
    history: bool = False,
) -> tuple[float, float]:
    """(instructions per job, Redis commands per job) of claiming and
    finishing `jobs` jobs over `groups` groups (0: ungrouped); `chain`: in
    finishes of that many, each fetching as many (finish_chained)."""
    admin = redis.Redis.from_url(url)
    admin.flushall()
    q = Queue(f"cost{groups}", url)
    if not evalsha:
        as_functions(q)
    recorder = (
        AttemptRecorder(AttemptHistory(), q.client, q.prefix, q.name, "w1", None)
        if history
        else None
    )
    # The arguments a worker with history sends with every finish.
    kept = {} if recorder is None else {"history": recorder.args()}
    added = len(add_jobs(q, groups, jobs))
    move_to_active(q, count=0)  # loads the scripts outside the count
    move_to_finished(q, [])
    admin.config_resetstat()
    control(pid, "-z")
    now, done, seq = int(time.time() * 1000), 0, 0
    if chain:
        done = finish_chained(q, groups, added, now, recorder, kept, chain)
    while done < added:
        got = claim_and_finish(q, now, seq, batch, recorder, kept)
        seq += got
        done += got
    total = dumped_total(folder, pid)
    stats = admin.info("commandstats")
    inner = script_commands(stats)
    q.close()
    admin.close()
    return total / done, inner / done


def claim_and_finish(
    q: Queue,
    now: int,
    seq: int,
    batch: int,
    recorder: AttemptRecorder | None = None,
    kept: dict[str, Any] | None = None,
) -> int:
    """Claim up to `batch` jobs and finish them, as a worker at that
    concurrency does; how many."""
    got = claimed(move_to_active(q, now=now, count=batch, seq=seq))
    if not got:
        raise SystemExit(f"{q.name}: a claim found nothing")
    entries = [finish_entry(q, job, recorder) for job in got]
    codes = move_to_finished(q, entries, now=now, **(kept or {}))[0]
    if any(code != 0 for code in codes):
        raise SystemExit(f"{q.name}: finish codes {codes}")
    return len(got)


#: --real: calls of one queue before the other queue's turn.
REAL_TURN = 4


def measure_real(url: str, groups: int, jobs: int, batch: int = BATCH) -> float:
    """Grouped / ungrouped time Redis spent in the scripts per job, the two
    queues' claims and finishes taking turns (REAL_TURN calls each)."""
    admin = redis.Redis.from_url(url)
    admin.flushall()
    # Per queue: [queue, claim seq, jobs done, script usec]
    runs: list[list[Any]] = []
    for spread in (0, groups):
        q = Queue(f"real{spread}", url)
        as_functions(q)
        added = len(add_jobs(q, spread, jobs))
        move_to_active(q, count=0)  # loads the scripts outside the count
        move_to_finished(q, [])
        runs.append([q, 0, 0, 0.0, added])
    now = int(time.time() * 1000)
    while any(run[2] < run[4] for run in runs):
        for run in runs:
            q = run[0]
            admin.config_resetstat()
            for _ in range(REAL_TURN):
                if run[2] >= run[4]:
                    break
                got = claim_and_finish(q, now, run[1], batch)
                run[1] += got
                run[2] += got
            run[3] += script_usec(admin.info("commandstats"))
    for run in runs:
        run[0].close()
    admin.close()
    ungrouped, grouped = runs
    return float((grouped[3] / grouped[2]) / (ungrouped[3] / ungrouped[2]))


def real_main(args: argparse.Namespace) -> int:
    """--real: the ratios, each the median of --rounds."""
    server = RedisServer().start()
    try:
        print(
            f"{args.jobs} jobs a queue, claims and finishes of {args.batch}, "
            f"queues taking turns, plain redis-server, median of {args.rounds}"
        )
        print(f"{'':<14}{'scripts time vs ungrouped':>28}")
        for groups in [g for g in args.groups if g]:
            ratios = [
                measure_real(server.url, groups, args.jobs, args.batch)
                for _ in range(args.rounds)
            ]
            label = "1 group" if groups == 1 else f"{groups:,} groups"
            print(
                f"{label:<14}{statistics.median(ratios):>28.3f}"
                f"  [{min(ratios):.3f}-{max(ratios):.3f}]"
            )
    finally:
        server.stop()
    return 0


def add_jobs(q: Queue, groups: int, jobs: int, data: Any = None) -> list[str]:
    """`jobs` no-op jobs (0 groups: ungrouped), spread over `groups` groups
    (at least one each), in bulks of 1,000; their ids, in order."""
    if groups:
        per = max(1, jobs // groups)
        specs = [
            {"name": "noop", "data": data, "opts": {"group": f"g{i % groups}"}}
            for i in range(per * groups)
        ]
    else:
        specs = [{"name": "noop", "data": data}] * jobs
    ids: list[str] = []
    for start in range(0, len(specs), 1000):
        ids.extend(str(j.id) for j in q.add_bulk(specs[start : start + 1000]))
    return ids


def as_functions(q: Queue) -> None:
    """Send q's claims and finishes as a worker's lean path does (FCALL)."""
    lean = sync_adds(q.client)
    assert lean is not None
    for name in ("move_to_active", "move_to_finished"):

        def call(keys: Any, args: Any, name: str = name) -> Any:
            return lean.call(Eval(name, keys, args))

        setattr(q.scripts, name, call)


def finish_entry(
    q: Queue, job: tuple[str, str, dict[str, str]], recorder: AttemptRecorder | None
) -> dict[str, Any]:
    """The finish entry of a claimed (id, token, fields), as a worker makes it."""
    job_id, token, fields = job
    e = entry(job_id, token=token)
    e["gid"] = fields.get("gid", "")
    if recorder is not None:
        claimed_job = Job.from_hash(q, job_id, fields)
        claimed_job.token = token
        e["attempt"] = recorder.record(claimed_job, "completed", None)
    return e


def finish_chained(
    q: Queue,
    groups: int,
    jobs: int,
    now: int,
    recorder: AttemptRecorder | None,
    kept: dict[str, Any],
    batch: int = 1,
) -> int:
    """Claim `batch` jobs, then finish each batch with a fetch of the next
    (a worker's calls; batch 1: a worker at concurrency 1), the claims after
    the first saying `leased` as a worker's do; returns the jobs finished."""
    got = claimed(move_to_active(q, now=now, count=batch, seq=0))
    done, seq = 0, batch
    while got:
        entries = [finish_entry(q, job, recorder) for job in got]
        reply = move_to_finished(
            q, entries, now=now, fetch=batch, seq=seq, leased=True, **kept
        )
        if reply[0] != [0] * len(entries):
            raise SystemExit(f"{groups} groups: finish codes {reply[0]}")
        done += len(entries)
        seq += batch
        got = claimed(reply[1:])
    if done < jobs:
        raise SystemExit(f"{groups} groups: the chain ended after {done} jobs")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs", type=int, help="jobs per configuration (2,000; --real 10,000)"
    )
    parser.add_argument("--groups", type=int, nargs="+", default=[0, 1, 100, 2000])
    parser.add_argument(
        "--batch", type=int, default=BATCH, help="jobs per claim and per finish"
    )
    parser.add_argument(
        "--chain",
        action="store_true",
        help="finish each job with a fetch of the next (a worker at concurrency 1)",
    )
    parser.add_argument(
        "--fetch",
        action="store_true",
        help="finishes of --batch fetching the next --batch (a worker's calls)",
    )
    parser.add_argument(
        "--evalsha", action="store_true", help="send EVALSHA, not FCALL"
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="each finish carries its attempt record, as workers send it",
    )
    parser.add_argument(
        "--cache",
        action="store_true",
        help="simulate the caches: estimated cycles instead of instructions",
    )
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="leave callgrind's dumps in DIR (for callgrind_annotate)",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="time on a plain redis-server, grouped and ungrouped taking turns",
    )
    parser.add_argument("--rounds", type=int, default=5, help="--real's rounds")
    args = parser.parse_args()
    if args.jobs is None:
        args.jobs = 10_000 if args.real else 2000
    if args.real:
        return real_main(args)
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        print("needs valgrind (apt install valgrind)", file=sys.stderr)
        return 2
    configs = args.groups if 0 in args.groups else [0, *args.groups]
    chain = 1 if args.chain else (args.batch if args.fetch else 0)
    with callgrind_redis(args.keep, args.cache) as (url, pid, folder):
        results = {
            g: measure(
                url,
                pid,
                folder,
                g,
                args.jobs,
                args.batch,
                chain,
                args.evalsha,
                args.history,
            )
            for g in configs
        }
    base = results[0][0]
    how = (
        f"finishes of {chain} each fetching the next {chain}"
        if chain
        else f"claims and finishes of {args.batch}"
    )
    sent = "EVALSHA" if args.evalsha else "FCALL"
    kept = ", with attempt records" if args.history else ""
    print(f"{args.jobs} jobs, {how}, as {sent}{kept}, redis-server under callgrind")
    unit = "cycles est./job" if args.cache else "instructions/job"
    print(f"{'':<14}{unit:>18}{'commands/job':>14}{'vs ungrouped':>14}")
    for groups, (per_job, cmds) in results.items():
        label = {0: "ungrouped", 1: "1 group"}.get(groups, f"{groups:,} groups")
        print(f"{label:<14}{per_job:>18,.0f}{cmds:>14.2f}{per_job / base:>14.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
