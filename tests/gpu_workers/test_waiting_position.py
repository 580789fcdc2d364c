"""A waiting job's place in line on a long queue: exact within the LPOS scan
of either end of `wait` (a job just added, a LIFO job, one near the front),
a range with an ETA range in between, prioritized jobs exact behind the
whole wait list, and the same round trips at 60 and at 100,000 jobs."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from gpu_workers import defaults
from gpu_workers.waiting import WaitingReason, explain
from gpu_workers.waiting.line import span_between
from gpu_workers.waiting.place import Place, wait_place
from queues import Job, Queue
from queues.connection import sync_client
from tests.dashboard.helpers import run_jobs
from tests.gpu_workers.waiting_helpers import (
    GiB,
    connected_worker,
    gpu_worker,
    push_ids,
)
from tests.helpers import round_trips

SCAN = defaults.WAITING_POSITION_SCAN
#: What run_jobs(q, 10) gives over the 5-minute window.
PER_MIN = 2.0


def _line(r: redis.Redis, redis_url: str, q: Queue, *jobs: Job[Any]) -> list[Any]:
    """The `queued` reason's numbers of each job (waiting or prioritized)."""
    pairs = [(job, q.get_job_state(job.id).value) for job in jobs]
    with connected_worker(redis_url, q):
        found = explain(r, q.prefix, q.name, pairs)
    return [_queued(found[job.id]).numbers for job in jobs]


def _queued(reason: WaitingReason) -> WaitingReason:
    line = [x for x in (reason, *reason.also) if x.code == "queued"]
    assert len(line) == 1
    return line[0]


def _eta(ahead: int) -> int:
    return int((ahead + 1) / PER_MIN * 60_000)


def test_a_job_just_added_to_100k_is_exact(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """The common case: a job just added behind 100,000 waiting jobs has
    exactly 100,000 ahead (LLEN - 1) and an ETA for that place."""
    run_jobs(q, 10, target="completed", value=1)
    push_ids(r, q, 100_000)
    job = q.add("job", {})
    (n,) = _line(r, redis_url, q, job)
    assert n["ahead"] == 100_000
    assert "ahead_at_least" not in n and "ahead_at_most" not in n
    assert n["eta_ms"] == _eta(100_000)
    with connected_worker(redis_url, q):
        found = explain(r, q.prefix, q.name, [(job, "waiting")])
    assert _queued(found[job.id]).message.startswith("100,000 jobs ahead of it; ")


def test_near_the_front_and_lifo_stay_exact(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """Behind 5 jobs with 100,000 more behind it: exactly 5 ahead; a LIFO job
    (RPUSHed at the front) is next in line."""
    run_jobs(q, 10, target="completed", value=1)
    push_ids(r, q, 5, tag="front")
    near = q.add("job", {})
    push_ids(r, q, 100_000)
    lifo = q.add("job", {}, lifo=True)
    near_n, lifo_n = _line(r, redis_url, q, near, lifo)
    assert near_n["ahead"] == 6  # the LIFO job went before it
    assert lifo_n["ahead"] == 0 and lifo_n["eta_ms"] == _eta(0)


def test_the_middle_of_a_long_line_is_a_range(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """A job with 30,000 ahead and 30,000 behind is past both scans: `ahead`
    is null, the range is [scan, LLEN - 1 - scan] and so is the ETA's."""
    run_jobs(q, 10, target="completed", value=1)
    push_ids(r, q, 30_000, tag="a")
    job = q.add("job", {})
    push_ids(r, q, 30_000, tag="b")
    (n,) = _line(r, redis_url, q, job)
    assert n["ahead"] is None
    assert (n["ahead_at_least"], n["ahead_at_most"]) == (SCAN, 60_000 - SCAN)
    assert n["ahead_at_least"] <= 30_000 <= n["ahead_at_most"]
    assert "eta_ms" not in n
    assert n["eta_at_least_ms"] == _eta(SCAN)
    assert n["eta_at_most_ms"] == _eta(60_000 - SCAN)
    with connected_worker(redis_url, q):
        found = explain(r, q.prefix, q.name, [(job, "waiting")])
    text = _queued(found[job.id]).message
    assert text.startswith(f"Between {SCAN:,} and {60_000 - SCAN:,} jobs ahead of it")
    assert "it starts in between " in text


@pytest.mark.parametrize("length", [6, 7, 8])
def test_every_place_at_the_scan_bounds(
    r: redis.Redis,
    redis_url: str,
    q: Queue,
    monkeypatch: pytest.MonkeyPatch,
    length: int,
) -> None:
    """With a scan of 3, every place of a line of 6, 7 and 8 jobs: exact
    within 3 of either end, else the range [3, length - 4], never off by
    one; at 7 the one place neither scan reads is exact too."""
    monkeypatch.setattr(defaults, "WAITING_POSITION_SCAN", 3)
    jobs = [q.add("job", {"i": i}) for i in range(length)]  # job i: i ahead
    for i, n in enumerate(_line(r, redis_url, q, *jobs)):
        if i < 3 or i >= length - 3 or length == 7:
            assert n["ahead"] == i, (length, i, n)
            assert "ahead_at_least" not in n
        else:
            assert n["ahead"] is None, (length, i, n)
            assert (n["ahead_at_least"], n["ahead_at_most"]) == (3, length - 4)


def test_a_job_gone_from_a_short_line_moved(
    r: redis.Redis, redis_url: str, q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both scans covering the whole line without finding the job: it moved
    (no place and no range), not "more than the scan ahead"."""
    monkeypatch.setattr(defaults, "WAITING_POSITION_SCAN", 3)
    jobs = [q.add("job", {"i": i}) for i in range(6)]
    r.lrem(q.keys.wait, 0, jobs[2].id)
    with connected_worker(redis_url, q):
        found = explain(r, q.prefix, q.name, [(jobs[2], "waiting")])
    line = _queued(found[jobs[2].id])
    assert line.numbers["ahead"] is None and "ahead_at_least" not in line.numbers
    assert "it moved" in line.message


def test_prioritized_behind_a_long_wait_list_is_exact(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """BullMQ takes `wait` first: a prioritized job has the whole wait list
    (100,000) plus its rank among prioritized jobs ahead, exactly, whatever
    that rank (ZRANK is exact at any depth)."""
    run_jobs(q, 10, target="completed", value=1)
    push_ids(r, q, 100_000)
    pipe = r.pipeline(transaction=False)
    for start in range(0, 20_000, 5_000):  # 20,000 of priority 1 before it
        scores = {f"p{i}": (1 << 32) + i for i in range(start, start + 5_000)}
        pipe.zadd(q.keys.prioritized, scores)  # type: ignore[arg-type]
    pipe.set(q.keys.pc, 20_000)  # BullMQ's counter: later jobs after them
    pipe.execute()
    second = q.add("p", {}, priority=2)
    first = q.add("p", {}, priority=1)
    second_n, first_n = _line(r, redis_url, q, second, first)
    assert first_n["ahead"] == 100_000 + 20_000
    assert second_n["ahead"] == 100_000 + 20_000 + 1
    assert second_n["ahead_same_priority"] == 0
    assert second_n["eta_ms"] == _eta(100_000 + 20_000 + 1)


def test_round_trips_at_60_and_at_100k(
    r: redis.Redis, redis_url: str, q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reasons of a job at the front, one at the back and a prioritized
    one cost the same four round trips (facts, CLIENT LIST, the fleet's index
    and records) and the same commands at 60 and at 100,000 waiting jobs;
    at 100,000 the one at the back is still exact."""
    gpu_worker(r, q, budget=21 * GiB, committed=0)
    conn = sync_client(redis_url)  # decoding as the pages' client does
    front = q.add("job", {})

    def read() -> tuple[int, int, dict[str, Any]]:
        back = q.add("job", {})
        prio = q.add("p", {}, priority=1)
        pairs = [(front, "waiting"), (back, "waiting"), (prio, "prioritized")]
        explain(conn, q.prefix, q.name, pairs)  # connections made, as on a warm page
        r.config_resetstat()
        taken = round_trips(conn, monkeypatch)
        with connected_worker(redis_url, q):
            found = explain(conn, q.prefix, q.name, pairs)
        stats = r.info("commandstats")
        monkeypatch.undo()
        calls = sum(v["calls"] for k, v in stats.items() if k != "cmdstat_config")
        r.lrem(q.keys.wait, 0, back.id)
        return calls, len(taken), _queued(found[back.id]).numbers

    push_ids(r, q, 59, tag="a")
    small, trips_small, back_small = read()
    assert back_small["ahead"] == 60
    push_ids(r, q, 100_000 - 59, tag="b")
    large, trips_large, back_large = read()
    assert back_large["ahead"] == 100_001
    assert large == small
    assert trips_small == trips_large == 4


@pytest.mark.parametrize(
    ("length", "front", "back", "place"),
    [
        (5, 7, None, Place(0, 0)),  # jobs LPUSHed after LLEN: never negative
        (5, None, 9, Place(0, 0)),
        (5, None, 1, Place(3, 3)),
        (1, 0, 0, Place(0, 0)),
        (0, 0, None, Place(0, 0)),  # popped after LLEN, found before
        (10, None, None, Place(3, 6)),
        (7, None, None, Place(3, 3)),
        (6, None, None, None),  # both scans read it all: it moved
        (None, 2, 2, None),
    ],
)
def test_a_place_read_from_a_moving_list_stays_consistent(
    length: int | None, front: int | None, back: int | None, place: Place | None
) -> None:
    """LLEN and the two LPOS replies of one pipeline (scan 3) that disagree,
    as a list moving between them can make them, still give a place with no
    negative number, none past the last place, and least <= most."""
    assert wait_place(length, front, back, 3) == place


def test_etas_read_as_people_say_them() -> None:
    """An ETA range in whole units, widened outwards to hold both ends."""
    minute = 60_000
    assert span_between(8 * minute + 20_000, 40 * minute + 5_000) == (
        "between 8 and 41 min"
    )
    assert span_between(50 * minute, 3 * 60 * minute) == "between 50 min and 3 h"
    assert span_between(12 * minute, 12 * minute) == "about 12 min"
    assert span_between(400, 30_000) == "between 400 ms and 30 s"
