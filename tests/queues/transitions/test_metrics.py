"""Metrics collected by move_to_finished (docs/protocol.md §1.2 `metrics:*`, 4.7 step
13), as BullMQ's workers write them with `metrics: {maxDataPoints}`."""

from __future__ import annotations

import redis

from queues.queue import Queue

from .helpers import (
    NOW,
    add_active,
    entry,
    lst,
    move_to_finished,
    new_queue,
    queue_keys,
)

MINUTE = 60_000
#: The start of a minute, so that NOW + seconds stays within it.
T0 = NOW - NOW % MINUTE


def finish(
    q: Queue, n: int = 1, at: int = T0, target: str = "completed", **opts: object
) -> list[int]:
    """Add n jobs, claim them and finish them at `at` in one call; the codes."""
    ids = [add_active(q, now=at - 1) for _ in range(n)]
    value = "null" if target == "completed" else "boom"
    entries = [entry(i, target, value) for i in ids]
    return list(move_to_finished(q, entries, now=at, **opts)[0])


def meta(r: redis.Redis, q: Queue, target: str = "completed") -> dict[str, str]:
    """The metrics hash of a target as stored."""
    return dict(r.hgetall(q.keys.metrics(target)))


def data(r: redis.Redis, q: Queue, target: str = "completed") -> list[int]:
    """The per-minute counts of a target, head (newest) first."""
    return [int(v) for v in lst(r, q.keys.metrics_data(target))]


def test_first_finish_opens_the_series(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The first finished job sets count 1, prevTS = now and prevCount 0, and
    writes no data point; more finishes in that minute only raise count."""
    q = new_queue(redis_url, qname)
    assert finish(q, at=T0 + 5_000, max_metrics=10) == [0]
    assert meta(r, q) == {"count": "1", "prevTS": str(T0 + 5_000), "prevCount": "0"}
    assert not r.exists(q.keys.metrics_data("completed"))
    assert finish(q, 2, at=T0 + 59_999, max_metrics=10) == [0, 0]
    assert meta(r, q) == {"count": "3", "prevTS": str(T0 + 5_000), "prevCount": "0"}
    assert not r.exists(q.keys.metrics_data("completed"))


def test_minute_rollover_pushes_the_closed_minute(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The first finish of a later minute pushes the count of the minute that
    closed (jobs since prevCount, not counting itself) and moves prevTS and
    prevCount to now; it counts towards the new minute."""
    q = new_queue(redis_url, qname)
    finish(q, 3, at=T0 + 10_000, max_metrics=10)
    finish(q, 1, at=T0 + MINUTE + 1, max_metrics=10)
    assert data(r, q) == [3]
    assert meta(r, q) == {
        "count": "4",
        "prevTS": str(T0 + MINUTE + 1),
        "prevCount": "3",
    }
    finish(q, 4, at=T0 + MINUTE + 30_000, max_metrics=10)
    finish(q, 1, at=T0 + 2 * MINUTE, max_metrics=10)
    assert data(r, q) == [5, 3]
    assert meta(r, q)["prevCount"] == "8"
    assert meta(r, q)["count"] == "9"


def test_skipped_minutes_push_zeros(r: redis.Redis, redis_url: str, qname: str) -> None:
    """Minutes without finishes between prevTS and now are zeros nearer the
    head than the closed minute's count."""
    q = new_queue(redis_url, qname)
    finish(q, 2, at=T0, max_metrics=10)
    finish(q, 1, at=T0 + 4 * MINUTE + 7, max_metrics=10)
    assert data(r, q) == [0, 0, 0, 2]
    finish(q, 1, at=T0 + 6 * MINUTE, max_metrics=10)
    assert data(r, q) == [0, 1, 0, 0, 0, 2]


def test_list_is_trimmed_to_max_data_points(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """The list keeps the newest maxDataPoints entries, and a gap longer than
    that writes at most maxDataPoints points (the closed minute's count then
    sits at the tail, as BullMQ writes it)."""
    q = new_queue(redis_url, qname)
    for minute in range(6):
        finish(q, minute + 1, at=T0 + minute * MINUTE, max_metrics=3)
    assert data(r, q) == [5, 4, 3]
    finish(q, 1, at=T0 + 100 * MINUTE, max_metrics=3)
    assert data(r, q) == [0, 0, 6]
    assert meta(r, q) == {
        "count": "22",
        "prevTS": str(T0 + 100 * MINUTE),
        "prevCount": "21",
    }


def test_long_gap_pushes_thousands_of_zeros(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """A gap of 12,000 minutes with maxDataPoints 12,000 writes 11,999 zeros
    and the closed count (more arguments than one Redis command from a script
    takes)."""
    q = new_queue(redis_url, qname)
    finish(q, 2, at=T0, max_metrics=12_000)
    finish(q, 1, at=T0 + 12_000 * MINUTE, max_metrics=12_000)
    points = data(r, q)
    assert len(points) == 12_000
    assert points[-1] == 2 and set(points[:-1]) == {0}


def test_failed_jobs_collect_into_metrics_failed(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Final failures count in `metrics:failed`, completions in
    `metrics:completed`, each series on its own clock."""
    q = new_queue(redis_url, qname)
    finish(q, 2, at=T0, target="failed", max_metrics=5)
    finish(q, 1, at=T0 + 1_000, max_metrics=5)
    finish(q, 1, at=T0 + MINUTE, target="failed", max_metrics=5)
    assert meta(r, q, "failed") == {
        "count": "3",
        "prevTS": str(T0 + MINUTE),
        "prevCount": "2",
    }
    assert data(r, q, "failed") == [2]
    assert meta(r, q) == {"count": "1", "prevTS": str(T0 + 1_000), "prevCount": "0"}
    assert not r.exists(q.keys.metrics_data("completed"))


def test_only_finished_entries_are_counted(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """An entry the script refuses (missing job, lost lock) is not counted;
    jobs deleted at once by removeOnComplete still are."""
    q = new_queue(redis_url, qname)
    job_id = add_active(q, now=T0)
    codes = move_to_finished(
        q,
        [entry("missing"), entry(job_id, keep={"count": 0}), entry(job_id)],
        now=T0,
        max_metrics=5,
    )[0]
    assert codes == [-1, 0, -1]
    assert meta(r, q)["count"] == "1"
    assert not r.exists(q.keys.job(job_id))


def test_no_metrics_without_the_option(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Without maxMetricsSize (or with 0) no metrics key is written."""
    q = new_queue(redis_url, qname)
    finish(q, 2, at=T0)
    finish(q, 1, at=T0 + MINUTE, target="failed")
    finish(q, 1, at=T0 + 2 * MINUTE, max_metrics=0)
    assert not [k for k in queue_keys(r, q) if ":metrics:" in k]


def test_obliterate_deletes_the_metrics(
    r: redis.Redis, redis_url: str, qname: str
) -> None:
    """Obliterating the queue deletes both series with it."""
    q = new_queue(redis_url, qname)
    finish(q, 1, at=T0, max_metrics=5)
    finish(q, 1, at=T0 + MINUTE, target="failed", max_metrics=5)
    finish(q, 1, at=T0 + 2 * MINUTE, target="failed", max_metrics=5)
    assert len([k for k in queue_keys(r, q) if ":metrics:" in k]) == 3
    q.obliterate()
    assert queue_keys(r, q) == set()
