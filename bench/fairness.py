"""Fair turns between groups (docs/groups.md), measured on real Bullpen workers.

    .venv/bin/python bench/fairness.py [--burst 5000] [--small 50] [--jobs 20000]
        [--weighted 2000] [--concurrency 50] [--rounds 8] [--output FILE]

One throwaway redis-server (a free port, no persistence) for (a)-(c), and one
started for each (d) spread, so that no spread runs on what another left
behind; the jobs are no-op
jobs processed by ONE Bullpen worker in its own OS process
(bench/bullpen_worker.py, an AsyncWorker at --concurrency). Every figure is
read back from Redis (each job's timestamp, processedOn and finishedOn).

  (a) burst     group A adds --burst jobs, then groups B-E add --small each,
                then the worker starts: the p95 wait of B-E's jobs (their
                start, from the worker's first start or their add, whichever
                is later) with groups, against the same adds without groups
                (today's FIFO) in the same run. No goal: the ratio is shown
                beside its ideal, B-E's turns against every job before them.
  (b) fairness  in that grouped run, while every group still has jobs to
                start: Jain's index of jobs per group over sliding windows
                of 10 jobs per group (step 2 per group), in the order they
                started (no-op jobs: started and finished are the same order).
                Goal: the mean over the windows >= 0.95 (the minimum shown).
  (c) weights   groups H (weight 3) and L (weight 1), --weighted jobs each,
                both backlogged: H's finished jobs / L's while both have work.
                Goal: within 5 % of 3.
  (d) overhead  jobs/s of no-op jobs at --concurrency spread over 1, 100
                and 10,000 groups against ungrouped jobs (first processedOn
                to last finishedOn). Per spread, two queues on one server,
                each with its worker (two processes, started once), take
                turns in segments of --jobs jobs (added while the queue is
                paused, then run with the other queue paused), ungrouped
                first and last: --rounds grouped segments, each compared
                with the mean of the ungrouped ones just before and after
                it. Goal: the median ratio of every spread >= 0.9x, and so
                the ratio its time in the worker's scripts allows
                (ungrouped / grouped, median of the segments): jobs/s on a
                noisy VM can pass by chance, the scripts' time seldom does.
                Each median comes with its 95 % bootstrap interval: on
                this VM a run of 16 segments gives about +/-0.08, of 48
                about +/-0.05 (2026-12-07).

It prints a table of ratios with PASS/FAIL per goal and writes the figures to
bench/results/fairness-<timestamp>.json (git-ignored). The default run takes
about two minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from groups_claim import script_usec  # noqa: E402
from groups_instructions import add_jobs  # noqa: E402
from throughput_libs import BenchError, Bullpen  # noqa: E402

from queues import Queue  # noqa: E402
from queues.devredis import interrupt_on_sigterm  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

#: The longest any one phase may take before the bench gives up on it.
PHASE_TIMEOUT_S = 120.0
ADD_BATCH = 1000


@contextmanager
def worker(
    url: str, queue: str, concurrency: int, processor: str = "noop"
) -> Iterator[None]:
    """bench/bullpen_worker.py on `queue` (throughput_libs' worker process),
    started (GO) on entry, stopped on exit; a `stamp` processor returns when
    it started (ms, sub-ms precision)."""
    proc = Bullpen(url).worker(queue, concurrency, processor)
    try:
        proc.read_json(60)  # ready
        proc.send("GO")
        yield
        proc.send("STOP")
        proc.read_json(60)
        proc.finish(30)
    finally:
        proc.kill()


def add(q: Queue, count: int, group: str | None, name: str = "noop") -> list[str]:
    """`count` no-op jobs of `group` (None: ungrouped), in bulk; their ids."""
    ids: list[str] = []
    opts = {"group": group} if group is not None else {}
    for start in range(0, count, ADD_BATCH):
        n = min(ADD_BATCH, count - start)
        jobs = q.add_bulk([{"name": name, "data": None, "opts": opts}] * n)
        ids.extend(str(j.id) for j in jobs)
    return ids


def wait_done(q: Queue, total: int) -> None:
    """Until `total` jobs of `q` completed (bounded by PHASE_TIMEOUT_S)."""
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while q.get_counts("completed")["completed"] < total:
        if time.monotonic() > deadline:
            raise BenchError(f"{q.name}: {total} jobs not done in {PHASE_TIMEOUT_S} s")
        time.sleep(0.05)


def times(r: redis.Redis, q: Queue, ids: Sequence[str]) -> list[tuple[float, ...]]:
    """(timestamp, processedOn, finishedOn, returnvalue) of each job, in
    `ids`' order (returnvalue: a stamp processor's start, else 0)."""
    out: list[tuple[float, ...]] = []
    fields = ("timestamp", "processedOn", "finishedOn", "returnvalue")
    for start in range(0, len(ids), 5000):
        pipe = r.pipeline(transaction=False)
        for i in ids[start : start + 5000]:
            pipe.hmget(q.keys.job(i), *fields)
        for row in pipe.execute():
            out.append(tuple(float(v) if v not in (None, "null") else 0.0 for v in row))
    return out


def p95(values: Sequence[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, int(round(0.95 * len(ordered))) - 1)]


def jain(counts: Sequence[int]) -> float:
    """Jain's fairness index: 1 when every count is equal, 1/n at worst."""
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else 1.0


def while_all_have_work(by_group: dict[str, list[tuple[float, ...]]]) -> list[str]:
    """The groups of the jobs started while every group still had a job not
    started yet, in the order they started (the stamp processor's sub-ms
    start: Redis' processedOn has 1 ms, a tie of dozens of no-op jobs)."""
    start = max(min(t[3] for t in ts) for ts in by_group.values())
    end = min(max(t[3] for t in ts) for ts in by_group.values())
    rows = sorted((t[3], g) for g, ts in by_group.items() for t in ts)
    return [g for at, g in rows if start <= at < end]


def sliding_jain(order: Sequence[str], groups: Sequence[str], per: int) -> list[float]:
    """Jain's index over windows of `per` jobs per group, sliding by a fifth."""
    size = per * len(groups)
    step = max(1, size // 5)
    out = []
    for at in range(0, len(order) - size + 1, step):
        window = order[at : at + size]
        out.append(jain([window.count(g) for g in groups]))
    return out


def burst(url: str, r: redis.Redis, args: argparse.Namespace) -> dict[str, Any]:
    """(a) and (b): a burst of group A, then B-E's few, grouped and not."""
    found: dict[str, Any] = {}
    small = ["B", "C", "D", "E"]
    for grouped in (False, True):
        q = Queue(f"fair-burst-{int(grouped)}", connection=url)
        by_group: dict[str, list[str]] = {
            "A": add(q, args.burst, "A" if grouped else None)
        }
        for g in small:
            by_group[g] = add(q, args.small, g if grouped else None)
        with worker(url, q.name, args.concurrency, "stamp"):
            wait_done(q, args.burst + args.small * len(small))
        stamps = {g: times(r, q, ids) for g, ids in by_group.items()}
        # Waits count from when the worker began: its start-up is no queue's.
        began = min(t[3] for ts in stamps.values() for t in ts)
        waits = [t[3] - max(t[0], began) for g in small for t in stamps[g]]
        key = "grouped" if grouped else "fifo"
        found[f"{key}_p95_wait_ms"] = p95(waits)
        turns = (len(small) + 1) * args.small
        found["ideal_ratio"] = turns / (args.burst + len(small) * args.small)
        if grouped:
            order = while_all_have_work(stamps)
            index = sliding_jain(order, ["A", *small], 10)
            found["jain_jobs"] = len(order)
            found["jain_windows"] = len(index)
            found["jain_mean"] = statistics.fmean(index) if index else None
            found["jain_min"] = min(index) if index else None
        q.obliterate(force=True)
        q.close()
    return found


def weighted(url: str, r: redis.Redis, args: argparse.Namespace) -> dict[str, Any]:
    """(c): H (weight 3) and L (weight 1), both backlogged."""
    q = Queue("fair-weights", connection=url)
    ids = {"H": add(q, args.weighted, "H"), "L": add(q, args.weighted, "L")}
    q.set_group("H", weight=3)
    q.set_group("L", weight=1)
    with worker(url, q.name, args.concurrency, "stamp"):
        wait_done(q, 2 * args.weighted)
    stamps = {g: times(r, q, i) for g, i in ids.items()}
    order = while_all_have_work(stamps)
    h, low = order.count("H"), order.count("L")
    q.obliterate(force=True)
    q.close()
    return {"jobs": len(order), "H": h, "L": low, "ratio": h / low if low else None}


def redis_cpu_s(r: redis.Redis) -> float:
    """The redis-server's CPU time so far (user + system), in seconds."""
    cpu = r.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def segment(
    r: redis.Redis, q: Queue, groups: int, jobs: int
) -> tuple[float, float, float]:
    """One (d) segment on `q` (paused, its worker idle): `jobs` no-op jobs
    spread over `groups` groups (0: ungrouped) added, the queue resumed
    until they are done, paused again and its completed jobs deleted.
    Returns jobs/s (first processedOn to last finishedOn), the
    redis-server's CPU us per job and its us per job inside scripts."""
    ids = add_jobs(q, groups, jobs)
    r.config_resetstat()
    before = redis_cpu_s(r)
    resumed_ms = time.time() * 1000
    q.resume()
    wait_done(q, len(ids))
    q.pause()
    used = redis_cpu_s(r) - before
    scripts = script_usec(r.info("commandstats"))
    stamps = times(r, q, ids)
    if min(t[1] for t in stamps) < resumed_ms - 1:
        raise BenchError(f"{q.name}: jobs started while the queue was paused")
    q.clean(0, 0, "completed")
    span_ms = max(t[2] for t in stamps) - min(t[1] for t in stamps)
    n = len(ids)
    return n / max(span_ms, 1) * 1000, used * 1e6 / n, scripts / n


def against_neighbours(
    timeline: Sequence[tuple[int, float]], grouped: int
) -> list[float]:
    """Each grouped segment's figure over the mean of the ungrouped segments
    just before and after it (time order, the queues alternating): a drift
    of the machine's speed over the three segments cancels to first order."""
    out = []
    for i, (g, value) in enumerate(timeline):
        if g != grouped:
            continue
        near = [
            timeline[j][1]
            for j in (i - 1, i + 1)
            if 0 <= j < len(timeline) and timeline[j][0] != grouped
        ]
        out.append(value / statistics.fmean(near))
    return out


def one_spread(groups: int, args: argparse.Namespace) -> dict[str, list[float]]:
    """(d) for one spread: a redis-server of its own holding two queues, an
    ungrouped one and one over `groups` groups, each with its worker process
    (bench/bullpen_worker.py at --concurrency) started once. The queues take
    turns, ungrouped first and last (--rounds grouped segments, one more
    ungrouped); a queue waits paused while the other runs. Segments seconds
    apart meet the same machine: separate runs a minute apart (this bench's
    method until 2026-12-07) moved by a third on this VM, round to round."""
    server = RedisServer().start()
    try:
        url = server.url
        r = redis.Redis.from_url(url, decode_responses=True)
        queues = {0: Queue("fair-ungrouped", connection=url)}
        queues[groups] = Queue(f"fair-{groups}-groups", connection=url)
        for q in queues.values():
            q.pause()
        timeline: list[tuple[int, tuple[float, float, float]]] = []
        with worker(url, queues[0].name, args.concurrency):
            with worker(url, queues[groups].name, args.concurrency):
                # U G U G ... U: every grouped segment between two ungrouped.
                for g in [0, *[groups, 0] * args.rounds]:
                    timeline.append((g, segment(r, queues[g], g, args.jobs)))
        for q in queues.values():
            q.close()
        r.close()
    finally:
        server.stop()
    found: dict[str, list[float]] = {}
    for i, key in enumerate(("rates", "cpu", "scripts")):
        for g, figures in timeline:
            found.setdefault(f"{key}:{g}", []).append(figures[i])
    rates = [(g, f[0]) for g, f in timeline]
    # Scripts' time: ungrouped / grouped, the jobs/s it allows.
    per_job = [(g, 1 / f[2]) for g, f in timeline]
    found["ratios"] = against_neighbours(rates, groups)
    found["script_ratios"] = against_neighbours(per_job, groups)
    return found


def overhead(args: argparse.Namespace) -> dict[str, Any]:
    """(d): for 1, 100 and 10,000 groups, the grouped queue's segments
    against the ungrouped queue's beside them (one_spread), per spread: the
    ratios of jobs/s and of the time in the worker's scripts, and the
    segments' jobs/s, redis-server CPU and scripts' time per job, ungrouped
    ("0") and grouped ("g"). The verdict is the median of a spread's ratios;
    the scripts' share is the steadier figure of what groups cost Redis, and
    the jobs/s it allows (ungrouped scripts' time / grouped) must meet the
    goal too."""
    out: dict[str, Any] = {}
    for groups in (1, 100, 10_000):
        found = one_spread(groups, args)
        spread: dict[str, Any] = {
            "ratios": found["ratios"],
            "script_ratios": found["script_ratios"],
        }
        for key in ("rates", "cpu", "scripts"):
            spread[key] = {"0": found[f"{key}:0"], "g": found[f"{key}:{groups}"]}
        out[str(groups)] = spread
    return out


def median_ci(values: Sequence[float], draws: int = 2000) -> tuple[float, float]:
    """A 95 % interval of the median of `values` (percentile bootstrap,
    seeded: the same figures give the same interval). On this VM segments
    range over about +/-30 %, so a 16-segment median moves by several
    hundredths from run to run: the interval says how far the verdict can be
    trusted."""
    pick = random.Random(0)
    medians = sorted(
        statistics.median(pick.choices(values, k=len(values))) for _ in range(draws)
    )
    return medians[int(draws * 0.025)], medians[int(draws * 0.975) - 1]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(a: dict[str, Any], c: dict[str, Any], d: dict[str, Any]) -> list[str]:
    """The table's lines, one per figure, with PASS/FAIL per goal."""
    fifo, grouped = a["fifo_p95_wait_ms"], a["grouped_p95_wait_ms"]
    lines = [
        f"(a) B-E p95 wait: FIFO {fifo:,.0f} ms, groups {grouped:,.0f} ms, "
        f"ratio {grouped / max(fifo, 1):.3f} (no goal; the ideal is about "
        f"{a['ideal_ratio']:.3f}: B-E's turns against every job before them)",
    ]
    mean, low = a["jain_mean"], a["jain_min"]
    if mean is None:
        lines.append("(b) Jain's index: too few jobs while all groups had work  FAIL")
    else:
        lines.append(
            f"(b) Jain's index over {a['jain_windows']} windows "
            f"({a['jain_jobs']} jobs): mean {mean:.3f}, min {low:.3f} "
            f"(goal mean >= 0.95)  {verdict(mean >= 0.95)}"
        )
    ratio = c["ratio"]
    ok = ratio is not None and abs(ratio / 3 - 1) <= 0.05
    lines.append(
        f"(c) weights 3:1: H {c['H']} / L {c['L']} jobs = "
        f"{ratio if ratio is None else round(ratio, 3)} (goal 3 +/- 5 %)  {verdict(ok)}"
    )
    for groups in ("1", "100", "10000"):
        spread = d[groups]
        ratios = spread["ratios"]
        x = statistics.median(ratios)
        allowed = statistics.median(spread["script_ratios"])
        rates, cpu, scripts = (
            {k: statistics.median(v) for k, v in spread[key].items()}
            for key in ("rates", "cpu", "scripts")
        )
        low, high = median_ci(ratios)
        lines.append(
            f"(d) {int(groups):>6,} groups: {rates['g']:,.0f} jobs/s, {x:.3f}x "
            f"ungrouped (median of {len(ratios)} segments, 95 % CI {low:.3f}-"
            f"{high:.3f}, range {min(ratios):.3f}-{max(ratios):.3f}); the scripts' "
            f"time allows {allowed:.3f}x (goal: both >= 0.9x)  "
            f"{verdict(min(x, allowed) >= 0.9)}"
        )
        lines.append(
            f"    its ungrouped queue {rates['0']:,.0f} jobs/s; per job (us, median), "
            f"ungrouped / grouped: redis-server CPU {cpu['0']:.1f} / {cpu['g']:.1f}, "
            f"in the worker's scripts {scripts['0']:.1f} / {scripts['g']:.1f}"
        )
    lines.append(
        "    (Redis shares this machine's CPU with the worker: its CPU per job "
        "bounds the jobs/s)"
    )
    return lines


def main() -> int:
    interrupt_on_sigterm()  # a killed run still stops its redis-server
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--burst", type=int, default=5000, help="group A's jobs")
    parser.add_argument("--small", type=int, default=50, help="jobs of each of B-E")
    parser.add_argument("--weighted", type=int, default=2000, help="jobs of H and L")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per (d) segment")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument(
        "--rounds",
        type=int,
        default=8,
        help="(d) grouped segments per spread, median kept",
    )
    parser.add_argument("--output", help="the JSON file (default bench/results/)")
    args = parser.parse_args()
    began = time.monotonic()
    server = RedisServer().start()
    try:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        a = burst(server.url, r, args)
        c = weighted(server.url, r, args)
    finally:
        server.stop()
    d = overhead(args)
    lines = report(a, c, d)
    print("\n".join(lines))
    print(f"({time.monotonic() - began:.0f} s)")
    out = Path(args.output) if args.output else None
    if out is None:
        RESULTS.mkdir(exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
        out = RESULTS / f"fairness-{stamp}.json"
    out.write_text(
        json.dumps(
            {"args": vars(args), "burst": a, "weights": c, "overhead": d}, indent=1
        )
    )
    goals = [line for line in lines if line.endswith(("PASS", "FAIL"))]
    return 0 if all(line.endswith("PASS") for line in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
