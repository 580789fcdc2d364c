"""Grouped jobs under several worker processes and faults: a processor that
records each run, and the checks over what it recorded and over the group
keys (docs/groups.md), for tests/faults/test_groups_faults.py,
tests/queues/groups/test_processes.py and bench/faults_soak.py.

Each run of a job (a process's call of the processor) writes its start and,
when it returns, its end under `test:{queue}:`: the hashes `runs` (run id ->
JSON {id, g, pid, s}) and `ends` (run id -> end). Times are `time.time()`:
every worker process runs on this machine, so they read one clock. The end
is taken before the worker's finish and the start after its claim, so two
runs that the queue kept apart (a group slot freed only by a finish) never
overlap in these intervals; an overlap is two runs really at once. A write is
sent again until Redis takes it (a fault may refuse it): a run id makes the
retry idempotent.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis

from queues import Job, Queue
from queues.group_types import group_active_count

#: The `--processor` path of `record`.
PROCESSOR = "tests.faults.grouped:record"
_RETRY_S = 0.05


def rec_key(queue: str, what: str) -> str:
    """The test's own key `what` for `queue` (outside the queue's prefix)."""
    return f"test:{queue}:{what}"


async def _write(client: Any, key: str, field: str, value: str) -> None:
    while True:
        try:
            await client.hset(key, field, value)
            return
        except redis.RedisError:
            await asyncio.sleep(_RETRY_S)


async def record(job: Job) -> Any:
    """Record the run's start, sleep `ms` of the job's data, record its end."""
    start = time.time()
    data = job.data if isinstance(job.data, dict) else {}
    run_id = f"{os.getpid()}:{uuid.uuid4().hex}"
    client = job.queue.client
    queue = job.queue.name
    run = {"id": job.id, "g": data.get("g"), "pid": os.getpid(), "s": start}
    await _write(client, rec_key(queue, "runs"), run_id, json.dumps(run))
    await asyncio.sleep(float(data.get("ms", 0)) / 1000)
    end = time.time()
    await _write(client, rec_key(queue, "ends"), run_id, repr(end))
    return job.id


@dataclass(frozen=True)
class Run:
    """One run of a job: its id, group, process and [start, end] (end None:
    the run never returned, its process was killed)."""

    run_id: str
    job_id: str
    group: str | None
    pid: int
    start: float
    end: float | None


def read_runs(url: str, queue: str) -> list[Run]:
    """Every recorded run, by start."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        runs = client.hgetall(rec_key(queue, "runs"))
        ends = client.hgetall(rec_key(queue, "ends"))
    finally:
        client.close()
    out = []
    for run_id, text in runs.items():
        r = json.loads(text)
        end = float(ends[run_id]) if run_id in ends else None
        out.append(Run(run_id, r["id"], r["g"], int(r["pid"]), float(r["s"]), end))
    return sorted(out, key=lambda r: r.start)


def close_killed(runs: Iterable[Run], killed: dict[int, float]) -> list[Run]:
    """Runs with an end: a run cut by its process's SIGKILL ends at the kill
    (`killed`: pid -> a time read after the process was reaped, so no later
    than that). A run without an end whose process was not killed is a bug:
    AssertionError."""
    out = []
    for r in runs:
        if r.end is None:
            assert r.pid in killed, f"run {r} never ended and its process lives"
            r = Run(r.run_id, r.job_id, r.group, r.pid, r.start, killed[r.pid])
        out.append(r)
    return out


def max_overlap(intervals: Iterable[tuple[float, float]]) -> int:
    """The most intervals [start, end) open at one time (an end at the same
    time as a start is counted first: the slot was freed before it was
    taken)."""
    points = []
    for start, end in intervals:
        points.append((start, 1))
        points.append((end, -1))
    points.sort()
    open_now = peak = 0
    for _, step in points:
        open_now += step
        peak = max(peak, open_now)
    return peak


def group_peaks(runs: Iterable[Run]) -> dict[str, int]:
    """Group -> the most of its runs at once."""
    by_group: dict[str, list[tuple[float, float]]] = {}
    for r in runs:
        if r.group is not None:
            assert r.end is not None, r
            by_group.setdefault(r.group, []).append((r.start, r.end))
    return {g: max_overlap(iv) for g, iv in by_group.items()}


def concurrent_reruns(runs: Iterable[Run]) -> list[tuple[Run, Run]]:
    """Pairs of runs of one job that overlap (BullMQ may run a job again
    after a stall, never twice at once)."""
    by_job: dict[str, list[Run]] = {}
    for r in runs:
        by_job.setdefault(r.job_id, []).append(r)
    pairs = []
    for job_runs in by_job.values():
        job_runs.sort(key=lambda r: r.start)
        for a, b in zip(job_runs, job_runs[1:]):
            assert a.end is not None, a
            if b.start < a.end:
                pairs.append((a, b))
    return pairs


def group_problems(url: str, queue: str) -> list[str]:
    """What is inconsistent in the queue's group keys once nothing runs
    (docs/groups.md): a ticket left in `groups:q` or parked, a group with
    jobs in its zset, a running count left, a parked count left (`pk`), the
    old layout's `groups:waiting`, grouped jobs counted as running, grouped
    delayed jobs, a group still
    marked slotted or parked."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        keys = Queue(queue, client).keys
        problems = []
        tickets = client.zcard(keys.groups_q)
        if tickets:
            problems.append(f"groups:q holds {tickets} tickets")
        for gid in client.zrange(keys.groups_index, 0, -1):
            waiting = client.zcard(keys.group(gid) + ":wait")
            parked = client.zcard(keys.group(gid) + ":parked")
            active = group_active_count(client.hget(keys.groups_active, gid))
            if waiting or parked or active:
                problems.append(
                    f"group {gid}: {waiting} in its zset, {parked} parked, a={active}"
                )
        parked = client.hget(keys.groups_meta, "pk")
        if int(parked or 0) != 0:
            problems.append(f"groups:meta counts {parked} parked tickets")
        if client.exists(keys.base + "groups:waiting"):  # the layout before 12-07
            problems.append("groups:waiting is back")
        running = client.hget(keys.groups_meta, "running")
        if int(running or 0) != 0:
            problems.append(f"groups:meta counts {running} grouped jobs running")
        delayed = client.zcard(keys.groups_delayed)
        if delayed:
            problems.append(f"groups:delayed holds {delayed}")
        for key in (keys.groups_slotted, keys.groups_parked):
            left = client.smembers(key)
            if left:
                problems.append(f"{key} holds {sorted(left)}")
        return problems
    finally:
        client.close()


def group_waiting(url: str, queue: str) -> int:
    """Grouped jobs waiting: each owns one ticket, in `groups:q` or parked."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        keys = Queue(queue, client).keys
        gids = client.zrange(keys.groups_index, 0, -1)
        parked = sum(client.zcard(keys.group(gid) + ":parked") for gid in gids)
        return int(client.zcard(keys.groups_q)) + parked
    except redis.RedisError:
        return -1
    finally:
        client.close()
