"""Charts' sampled series (gpu_workers/series) against a real Redis: one point
per minute whoever samples, bounded reads, rollups and trimming."""

from __future__ import annotations

from typing import Any

import redis

from gpu_workers.keys import BullpenKeys
from gpu_workers.series import (
    SeriesSampler,
    gpu_series,
    overall_series,
    points,
    queue_series,
    store,
)
from gpu_workers.series.sampler import last_minute
from queues import Queue
from tests.dashboard.helpers import gpu_fleet
from tests.queues.transitions.helpers import (
    claimed,
    entry,
    move_to_active,
    move_to_finished,
)

MIN = 60_000
#: A time far ahead of the clock, so sampled minutes are ours alone.
FUTURE = 4_000_000_000_000
KEYS = BullpenKeys()


def finish(
    q: Queue, r: redis.Redis, n: int, added: int, started: int, ended: int, **kw: Any
) -> None:
    """n jobs added at `added`, started at `started` and finished at `ended`
    (ms) by the real scripts."""
    ids = [q.add("job", {}).id for _ in range(n)]
    for job_id in ids:
        r.hset(q.keys.job(str(job_id)), "timestamp", added)
    got = claimed(move_to_active(q, now=started, count=n))
    target = kw.pop("target", "completed")
    keep = kw.pop("keep", None)
    entries = [entry(i, target, token=t, keep=keep) for i, t, _ in got]
    move_to_finished(q, entries, now=ended, **kw)


def point(r: redis.Redis, q: Queue, level: str = "1m") -> list[dict[str, Any]]:
    raw = r.zrange(KEYS.series("bull", q.name, level), 0, -1)
    return [p for p in map(points.parse, raw) if p]


def test_a_minute_point_counts_jobs_and_takes_percentiles(
    r: redis.Redis, q: Queue, redis_url: str
) -> None:
    """The sampled minute holds the jobs finished in it, their wait and run
    percentiles, the backlog and the oldest waiting age; a second sampler
    (another process or host) finds the minute claimed and writes nothing."""
    m = last_minute(FUTURE)
    finish(q, r, 10, added=m, started=m + 1000, ended=m + 3000)
    finish(q, r, 10, added=m, started=m + 4000, ended=m + 10_000)
    finish(q, r, 2, added=m, started=m + 1000, ended=m + 2000, target="failed")
    finish(q, r, 1, added=m, started=m + 1000, ended=m + 61_000)  # next minute
    q.add("waits", {})
    q.add("later", {}, delay=60_000)
    now = m + MIN + 6000
    assert (
        SeriesSampler(redis_url).tick([("bull", q.name)], gpus=False, now_ms=now) == 1
    )
    assert (
        SeriesSampler(redis_url).tick([("bull", q.name)], gpus=False, now_ms=now) == 0
    )
    [p] = point(r, q)
    assert (p["t"], p["c"], p["f"], p["n"]) == (m, 20, 2, 22)
    assert (p["w50"], p["w95"]) == (1.0, 4.0)
    assert (p["r50"], p["r95"]) == (2.0, 6.0)
    assert (p["b"], p["a"]) == (2, 0)
    assert p["o"] is not None and p["o"] > 0


def test_bullmq_metrics_count_jobs_retention_removed(
    r: redis.Redis, q: Queue, redis_url: str
) -> None:
    """Jobs removed on completion leave no trace in `completed`; where workers
    keep BullMQ's metrics the point still counts them."""
    m = last_minute(FUTURE)
    finish(q, r, 7, m, m + 100, m + 200, keep={"count": 0}, max_metrics=100)
    assert r.zcard(q.keys.completed) == 0
    SeriesSampler(redis_url).tick([("bull", q.name)], gpus=False, now_ms=m + 66_000)
    assert point(r, q)[0]["c"] == 7


def test_rollups_follow_and_every_level_stays_bounded(r: redis.Redis) -> None:
    """30 hours of minute points keep 24 hours of them; each 10-minute and
    hourly point sums its minutes' counts and averages their backlog."""
    start = 1_700_000_400_000 - 1_700_000_400_000 % 3600_000
    minutes = [
        {"t": start + i * MIN, "m": 1, "c": 2, "f": i % 2, "b": 10, "n": 2}
        for i in range(30 * 60)
    ]
    now = minutes[-1]["t"] + MIN

    def key_of(level: str) -> str:
        return KEYS.series("bull", "roll", level)

    for hour_start in range(0, len(minutes), 60):  # an hour per write
        chunk = minutes[hour_start : hour_start + 60]
        store.write(
            r, [(key_of, p) for p in chunk], points.over_time, chunk[-1]["t"] + MIN
        )
    one, ten, hour = (
        r.zrange(key_of(lv), 0, -1, withscores=True) for lv in store.LEVEL_NAMES
    )
    assert len(one) == 24 * 60 and one[0][1] >= now - 24 * 3600_000
    assert len(ten) == 30 * 6 and len(hour) == 30
    tens = [points.parse(v) for v, _ in ten]
    assert all(p and (p["c"], p["f"], p["b"], p["m"]) == (20, 5, 10, 10) for p in tens)
    hours = [points.parse(v) for v, _ in hour]
    assert all(p and (p["c"], p["m"]) == (120, 60) for p in hours)


def test_a_point_a_minute_keeps_the_retention_within_the_trim_period(
    r: redis.Redis,
) -> None:
    """Written as a sampler writes (one minute at a time), a level is
    trimmed one bucket in TRIM_EVERY: never more than TRIM_EVERY - 1 points
    past its retention, and back to it at every trim."""
    start = 1_700_000_400_000 - 1_700_000_400_000 % 3600_000
    keep_points = 24 * 60

    def key_of(level: str) -> str:
        return KEYS.series("bull", "minutely", level)

    sizes = []
    for i in range(keep_points + 45):
        point = {"t": start + i * MIN, "m": 1, "c": 1, "f": 0, "b": 0, "n": 1}
        store.write(r, [(key_of, point)], points.over_time, point["t"] + MIN)
        sizes.append(r.zcard(key_of("1m")))
    over = [n - keep_points for n in sizes[keep_points:]]
    assert max(over) == store.TRIM_EVERY - 1 and min(over) == 0


def test_chart_read_has_gaps_and_a_live_minute(
    r: redis.Redis, q: Queue, redis_url: str
) -> None:
    """The 1 h chart is 60 minutes on a grid: unsampled minutes are gaps
    (None), not zeros, and the open minute is read live, per minute."""
    now = FUTURE + 30_000
    cur = now - now % MIN
    finish(q, r, 3, added=cur, started=cur + 1000, ended=cur + 2000)
    chart = queue_series(r, KEYS, [("bull", q.name)], "1h", now + 5000)
    assert len(chart["t"]) == 60 and chart["t"][-1] == cur // 1000
    assert chart["completed"][-1] == 3 and chart["completed"][0] is None
    assert chart["live_from"] == (cur - MIN) // 1000
    assert queue_series(r, KEYS, [("bull", q.name)], "7d", now)["step_s"] == 3600


def test_gpus_are_sampled_once_a_minute_and_read_per_gpu(
    r: redis.Redis, redis_url: str
) -> None:
    """Each live GPU gets a point of its utilisation and committed VRAM."""
    gpu_fleet(r)
    sampler = SeriesSampler(redis_url)
    assert sampler.tick([], now_ms=FUTURE) == 2
    assert sampler.tick([], now_ms=FUTURE) == 0
    chart = gpu_series(r, KEYS, "1h", FUTURE)
    at = chart["t"].index(last_minute(FUTURE) // 1000)
    by_uuid = {g["uuid"]: g for g in chart["gpus"]}
    real = by_uuid["GPU-abc"]
    assert real["util"][at] == 87 and real["committed"][at] == 30 * 2**30
    assert real["util"][at - 1] is None  # not sampled: a gap
    assert real["host"] == "h1" and real["total"] == 141 * 2**30
    assert by_uuid["SIM-h1-0"]["committed"][at] == 8 * 2**30


def test_the_overall_series_combines_every_queue_a_minute_later(
    r: redis.Redis, q: Queue, redis_url: str
) -> None:
    """A minute after the queues' own points, one sampler combines them into
    the overall series (the overview's chart reads it in one call, however
    many queues); another finds the minute claimed. The newest minutes it
    does not hold yet come from the queues' points or live."""
    other = Queue(q.name + "-b", redis_url)
    refs = [("bull", q.name), ("bull", other.name)]
    m = last_minute(FUTURE)
    finish(q, r, 3, added=m, started=m + 1000, ended=m + 2000)
    finish(other, r, 4, added=m, started=m + 1000, ended=m + 5000)
    finish(other, r, 1, added=m, started=m + 1000, ended=m + 5000, target="failed")
    sampler = SeriesSampler(redis_url)
    sampler.tick(refs, gpus=False, now_ms=m + MIN + 6000)
    assert not sampler.tick_overall(refs, now_ms=m + MIN + 6000)  # too soon
    later = m + 2 * MIN + 6000
    assert sampler.tick_overall(refs, now_ms=later)
    assert not SeriesSampler(redis_url).tick_overall(refs, now_ms=later)
    [p] = [points.parse(x) for x in r.zrange(KEYS.series_overall("1m"), 0, -1)]
    assert p is not None
    assert (p["t"], p["c"], p["f"], p["n"]) == (m, 7, 1, 8)
    assert (p["w95"], p["r95"]) == (1.0, 4.0)  # the highest of the queues'
    hour = [points.parse(x) for x in r.zrange(KEYS.series_overall("1h"), 0, -1)]
    assert [h["c"] for h in hour if h] == [7]
    # Far from the tail, the chart reads the overall series alone: a queue
    # point written there afterwards is not added in.
    much_later = m + 30 * MIN
    r.zadd(KEYS.series("bull", q.name, "1m"), {points.dump({"t": m, "c": 99}): m})
    chart = overall_series(r, KEYS, refs, "1h", much_later)
    assert chart["completed"][chart["t"].index(m // 1000)] == 7
    # In the tail, minutes the overall series lacks are combined from the
    # queues; the open one is read live (nothing finished in it).
    finish(q, r, 2, added=m, started=much_later + 100, ended=much_later + 500)
    tail = overall_series(r, KEYS, refs, "1h", much_later + 1000)
    assert tail["completed"][-1] == 2 and tail["live_from"] is not None
    other.close()


def test_minutes_no_sampler_saw_come_from_bullmq_metrics(
    r: redis.Redis, q: Queue
) -> None:
    """Before sampling began (or while no sampler ran), a queue's chart still
    counts the jobs BullMQ's per-minute metrics recorded, even those removed
    on completion; minutes after the metrics' last one stay unknown."""
    t0 = last_minute(FUTURE) - 20 * MIN
    finish(q, r, 3, t0, t0 + 100, t0 + 200, keep={"count": 0}, max_metrics=100)
    later = t0 + 5 * MIN
    finish(q, r, 2, later, later + 100, later + 200, keep={"count": 0}, max_metrics=100)
    chart = queue_series(r, KEYS, [("bull", q.name)], "1h", t0 + 20 * MIN + 30_000)
    done = dict(zip(chart["t"], chart["completed"]))
    assert done[t0 // 1000] == 3 and done[later // 1000] == 2
    assert done[(t0 + MIN) // 1000] == 0  # metrics kept, nothing finished
    assert done[(later + MIN) // 1000] is None  # after their last minute
    assert all(v is None for v in chart["wait_p95"][:-2])  # counts only


def test_a_sampler_claims_a_minute_once(
    r: redis.Redis, q: Queue, redis_url: str
) -> None:
    """Ticks every few seconds see the same minute again: a sampler that
    already tried its claims sends no SET for them until the next minute."""
    sampler = SeriesSampler(redis_url)
    m = last_minute(FUTURE)
    refs = [("bull", q.name)]

    def sets() -> int:
        return int(r.info("commandstats").get("cmdstat_set", {}).get("calls", 0))

    assert sampler.tick(refs, gpus=False, now_ms=m + MIN + 6000) == 1
    before = sets()
    assert sampler.tick(refs, gpus=False, now_ms=m + MIN + 21_000) == 0
    assert sets() == before
    sampler.tick(refs, gpus=False, now_ms=m + 2 * MIN + 6000)  # the next minute
    assert sets() > before
