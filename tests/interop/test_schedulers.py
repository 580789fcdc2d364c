"""Interop point 7: a job scheduler made in one language keeps producing
iterations when only the other language's workers run (each worker adds the
next iteration when it takes the current one, as BullMQ's worker does)."""

from __future__ import annotations

from typing import Any

from queues import Queue
from tests.helpers import wait_until

from .helpers import call, node, node_worker, python_worker

EVERY_MS = 250


def _iterations(queue: Queue, scheduler_id: str) -> list[Any]:
    """Completed iterations of a scheduler, oldest run first."""
    jobs = [j for j in queue.get_jobs("completed") if j.repeat_job_key == scheduler_id]
    return sorted(jobs, key=lambda j: int(j.id.rsplit(":", 1)[1]))


def _check_series(jobs: list[Any], scheduler_id: str, by: str) -> None:
    millis = [int(j.id.rsplit(":", 1)[1]) for j in jobs]
    assert all(
        j.id == f"repeat:{scheduler_id}:{m}" for j, m in zip(jobs, millis, strict=True)
    )
    steps = {b - a for a, b in zip(millis, millis[1:], strict=False)}
    assert all(step % EVERY_MS == 0 for step in steps), steps
    assert all(j.returnvalue["by"] == by and j.data == {"n": 1} for j in jobs)
    assert [j.opts["repeat"]["count"] for j in jobs] == list(range(1, len(jobs) + 1))


def test_node_scheduler_python_workers(redis_url: str, qname: str) -> None:
    """An `every` scheduler upserted by Node yields at least 5 iterations run by
    Bullpen workers alone, one slot after another; Node's scheduler record
    counts them."""
    queue = Queue(qname, redis_url)
    call(
        redis_url,
        qname,
        "upsertJobScheduler",
        "tick",
        {"every": EVERY_MS},
        {"name": "tick", "data": {"n": 1}, "opts": {"attempts": 2}},
    )
    with python_worker(redis_url, qname, "py"):
        wait_until(
            lambda: len(_iterations(queue, "tick")) >= 5,
            15,
            what="five iterations on Bullpen workers",
        )
    jobs = _iterations(queue, "tick")
    _check_series(jobs, "tick", "py")
    assert all(j.opts["attempts"] == 2 for j in jobs)
    [record] = call(redis_url, qname, "getJobSchedulers")
    assert record["key"] == "tick" and record["every"] == EVERY_MS
    assert record["iterationCount"] >= len(jobs)
    assert record["template"] == {"data": {"n": 1}, "opts": {"attempts": 2}}
    assert queue.remove_job_scheduler("tick") is True
    assert call(redis_url, qname, "getJobSchedulers") == []
    queue.close()


def test_python_scheduler_node_workers(redis_url: str, qname: str) -> None:
    """An `every` scheduler upserted by Bullpen yields at least 5 iterations run
    by Node workers alone; Node reads it with getJobScheduler; a Bullpen cron
    scheduler is continued by Node too."""
    queue = Queue(qname, redis_url)
    queue.upsert_job_scheduler(
        "tock", every_ms=EVERY_MS, template={"name": "tock", "data": {"n": 1}}
    )
    queue.upsert_job_scheduler(
        "cron", cron="* * * * * *", tz="Europe/Paris", template={"data": {"n": 1}}
    )
    record = call(redis_url, qname, "getJobScheduler", "tock")
    assert (record["name"], record["every"], record["iterationCount"]) == (
        "tock",
        EVERY_MS,
        1,
    )
    assert record["template"] == {"data": {"n": 1}}
    cron = call(redis_url, qname, "getJobScheduler", "cron")
    assert (cron["pattern"], cron["tz"]) == ("* * * * * *", "Europe/Paris")
    worker = node_worker(redis_url, qname, name="node", concurrency=2)
    try:
        wait_until(
            lambda: (
                len(_iterations(queue, "tock")) >= 5
                and len(_iterations(queue, "cron")) >= 2
            ),
            15,
            what="iterations on Node workers",
        )
    finally:
        worker.stop()
    _check_series(_iterations(queue, "tock"), "tock", "node")
    _check_series(_iterations(queue, "cron"), "cron", "node")
    cron_millis = [int(j.id.rsplit(":", 1)[1]) for j in _iterations(queue, "cron")]
    assert all(m % 1000 == 0 for m in cron_millis)
    assert queue.get_job_scheduler("tock").iteration_count >= 5
    queue.close()


def test_cron_next_run_matches_bullmq(redis_url: str) -> None:
    """Bullpen's next cron run equals BullMQ's (cron-parser) for second, minute,
    hourly, daily, weekday and monthly patterns, with and without a time zone,
    and on the nights New York and Paris change clocks: a skipped wall time
    runs after the change, a fixed hour does not run twice."""
    from queues.scheduler import cron_next

    base = 1_796_000_265_541
    patterns = [
        "*/5 * * * * *",
        "*/10 * * * * *",
        "0 * * * * *",
        "*/15 * * * *",
        "0 * * * *",
        "30 2 * * *",
        "0 9 * * 1-5",
        "0 0 1 * *",
        "15 3 * * 0",
    ]
    cases = [
        [p, base + k * 3_600_123, tz]
        for k, p in enumerate(patterns)
        for tz in (None, "Europe/Paris", "America/New_York", "Asia/Tokyo")
    ]
    # Around 2026-03-08 (New York springs forward) and 2026-11-01 (falls back).
    dst = (
        "30 2 * * *",
        "30 1 * * *",
        "0 * * * *",
        "*/20 * * * *",
        "0 2 * * *",
        "0 3 * * *",
        "*/5 * * * * *",
    )
    for at in (
        1_772_951_400_000,
        1_793_511_000_000,
        1_793_514_600_000,
        1_772_949_600_000,
        1_793_509_200_000,
    ):
        cases += [
            [p, at, tz] for p in dst for tz in ("America/New_York", "Europe/Paris")
        ]
    expected = node(redis_url, "cron", cases)
    assert [cron_next(p, at, tz) for p, at, tz in cases] == expected
