"""GPU-time accounting: a real GpuWorker on a simulated GPU counts each
attempt's GPU-seconds and VRAM-GiB-seconds per queue, job name and tenant in
hour, day and total hashes, with TTLs and a cap that folds the rest into
"(other)"; an attempt across an hour's end is split between both hours."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis

from gpu_workers import gputime
from gpu_workers.attempts import job_attempts
from gpu_workers.fleet import Fleet
from gpu_workers.gputime import DAY, HOUR, OTHER, GpuTimeRecorder, Retention, Usage
from gpu_workers.keys import BullpenKeys
from queues import Queue
from tests.gpu_workers import handlers_for_tests  # noqa: F401 - registers test handlers
from tests.gpu_workers.helpers import WorkerThread, make_spec
from tests.helpers import wait_until

GiB = 2**30
KEYS = BullpenKeys()


def _bucket(r: redis.Redis, period: str, dim: str) -> dict[str, gputime.Row]:
    step = gputime.PERIOD_S[period]
    stamp = gputime.bucket_stamp(period, int(time.time() // step) * step)
    return gputime.parse_hash(r.hgetall(KEYS.gputime(period, stamp, dim)))


def _ended(q: Queue, *ids: str) -> bool:
    return all(q.get_job_state(i).value in ("completed", "failed") for i in ids)


@pytest.fixture
def worker(redis_url: str, qname: str) -> Iterator[WorkerThread]:
    """One GpuWorker on simulated GPU SIM-t-0 whose buckets hold 2 keys."""
    w = WorkerThread(make_spec(redis_url, qname, gpu_time_max_keys=2))
    yield w
    if w.alive:
        w.stop()


def test_attempts_are_counted_per_queue_name_and_tenant(
    q: Queue, r: redis.Redis, worker: WorkerThread, redis_url: str
) -> None:
    """A 0.4 s job of 2 GiB for tenant acme and a failed (out of memory) one
    without a tenant: both counted, with their seconds, VRAM-GiB-seconds,
    the simulated mark, TTLs on the buckets and none on the totals; the
    attempt records carry their own GPU-seconds."""
    began = time.monotonic()
    slow = q.add("test.sleep", {"s": 0.4, "vram": "2GiB"}, tenant="acme")
    oom = q.add("test.overalloc", {"vram": "1GiB", "alloc": "100GiB"})
    wait_until(lambda: _ended(q, slow.id, oom.id), what="both jobs ended")
    # No attempt can have lasted longer than the test watched them (a busy
    # machine stretches both alike).
    watched_s = time.monotonic() - began
    wait_until(lambda: _bucket(r, HOUR, "queue"), what="the hour bucket")
    for period in (HOUR, DAY):
        queues = _bucket(r, period, "queue")
        assert list(queues) == [q.keys.qualified_name]
        row = queues[q.keys.qualified_name]
        assert row.attempts == 2
        assert 0.4 <= row.gpu_seconds < 2 * watched_s  # two attempts
        assert row.simulated_seconds == pytest.approx(row.gpu_seconds)
        tenants = _bucket(r, period, "tenant")
        assert set(tenants) == {"acme", gputime.NO_TENANT}
        acme = tenants["acme"]
        assert acme.attempts == 1 and 0.4 <= acme.gpu_seconds < watched_s
        assert acme.vram_gib_seconds == pytest.approx(2 * acme.gpu_seconds, rel=1e-3)
        names = _bucket(r, period, "name")
        assert set(names) == {"test.sleep", "test.overalloc"}
        # The failed attempt held at least what it declared (1 GiB).
        bad = names["test.overalloc"]
        assert bad.attempts == 1 and bad.vram_gib_seconds >= bad.gpu_seconds
    hour_key = r.keys(f"{KEYS.ns}:{{gputime}}:hour:*:queue")[0]
    day_key = r.keys(f"{KEYS.ns}:{{gputime}}:day:*:queue")[0]
    kept = Retention()
    assert kept.hours_kept * 3600 < r.ttl(hour_key) <= (kept.hours_kept + 1) * 3600
    assert kept.days_kept * 86400 < r.ttl(day_key) <= (kept.days_kept + 1) * 86400
    totals = gputime.read_totals(r, KEYS)
    assert r.ttl(KEYS.gputime_total("queue")) == -1
    assert totals["queue"][q.keys.qualified_name].attempts == 2
    fleet = Fleet(r)
    history = job_attempts(fleet, "bull", q.name, q.get_job(slow.id), "completed")
    assert history.gpu_seconds == pytest.approx(acme.gpu_seconds, abs=0.01)
    assert history.rows[0]["tenant"] == "acme"


def test_keys_past_the_cap_fold_into_other(
    q: Queue, r: redis.Redis, worker: WorkerThread
) -> None:
    """Four tenants through a worker whose buckets hold two keys: two keep
    their own rows, the other two are counted in "(other)", nothing lost."""
    jobs = [q.add("test.sleep", {"s": 0.01}, tenant=f"t{i}") for i in range(4)]
    wait_until(lambda: _ended(q, *(j.id for j in jobs)), what="the jobs ended")
    wait_until(
        lambda: sum(x.attempts for x in _bucket(r, HOUR, "tenant").values()) == 4,
        what="four attempts counted",
    )
    for rows in (_bucket(r, HOUR, "tenant"), gputime.read_totals(r, KEYS)["tenant"]):
        assert len(rows) == 3 and OTHER in rows
        assert rows[OTHER].attempts == 2
        assert sum(x.attempts for x in rows.values()) == 4


def test_an_attempt_across_an_hour_is_split(r: redis.Redis, redis_url: str) -> None:
    """45 s before and 15 s after the hour: 45 s in the first hour, 15 s and
    the attempt in the second, 60 s in the day; VRAM-GiB-s by the seconds."""
    hour = (int(time.time()) // 3600 - 1) * 3600
    usage = Usage("bull:q", "render", "acme", hour - 45, hour + 15, 4 * GiB, False)

    async def record() -> None:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        await GpuTimeRecorder(client, KEYS).record(usage)
        await client.aclose()

    asyncio.run(record())
    before, after = gputime.read_buckets(r, KEYS, HOUR, [hour - 3600, hour], "queue")
    assert before[1]["bull:q"].gpu_seconds == pytest.approx(45)
    assert before[1]["bull:q"].attempts == 0
    assert after[1]["bull:q"].gpu_seconds == pytest.approx(15)
    assert after[1]["bull:q"].vram_gib_seconds == pytest.approx(60)
    assert after[1]["bull:q"].attempts == 1
    assert after[1]["bull:q"].simulated_seconds == 0
    days = gputime.bucket_starts(DAY, hour - 45, hour + 15)
    parts = gputime.read_buckets(r, KEYS, DAY, days, "name")
    total = gputime.sum_rows(p for _, p in parts)
    assert total["render"].gpu_seconds == pytest.approx(60)
    assert total["render"].attempts == 1
