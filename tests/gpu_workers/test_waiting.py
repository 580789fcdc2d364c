"""Why is this job waiting? Each situation is built for real in the test
Redis (the queue's own scripts, a real worker, GPU heartbeats) and the reason's
code and numbers are asserted."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from gpu_workers.waiting import explain
from queues import FlowProducer, Queue, ops
from queues.connection import sync_client
from tests.dashboard.helpers import make_active, run_jobs
from tests.gpu_workers.waiting_helpers import (
    GiB,
    big_gpu,
    codes,
    connected_worker,
    demo_job,
    gpu_worker,
    reason_of,
)
from tests.helpers import round_trips, wait_until
from tests.queues.transitions.helpers import (
    claimed,
    entry,
    move_to_active,
    move_to_finished,
)
from tests.queues.worker.helpers import start_worker_thread


def test_paused_queue(r: redis.Redis, redis_url: str, q: Queue) -> None:
    """A paused queue's waiting job: `queue_paused`, its place in line beside."""
    job = q.add("job", {})
    q.pause()
    with connected_worker(redis_url, q):
        reason = reason_of(r, q, job.id)
    assert reason is not None
    assert codes(reason) == ["queue_paused", "queued"]
    assert reason.also[0].numbers["ahead"] == 0


def test_global_concurrency_with_and_without_a_worker(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """Concurrency 1 with one job active: with no worker connected the reason
    is `no_worker` (concurrency beside it); once a real worker is connected
    it is `global_concurrency`, 1 of 1."""
    q.set_global_concurrency(1)
    make_active(q)
    job = q.add("job", {})
    reason = reason_of(r, q, job.id)
    assert reason is not None
    assert codes(reason) == ["no_worker", "global_concurrency", "queued"]
    worker = start_worker_thread(q.name, lambda job: None, redis_url)
    try:
        wait_until(lambda: q.get_workers_count() == 1, timeout=10)
        reason = reason_of(r, q, job.id)
        assert reason is not None
        assert codes(reason) == ["global_concurrency", "queued"]
        assert reason.numbers == {"active": 1, "concurrency": 1}
        assert "1 of 1" in reason.message
        assert q.get_job_state(job.id).value == "waiting"  # the worker held off
    finally:
        worker.stop()


def test_rate_limited(r: redis.Redis, redis_url: str, q: Queue) -> None:
    """A full limiter window: `rate_limited` until now + the limiter's PTTL;
    the ETA beside it is never before the window ends, however fast jobs
    finished before."""
    run_jobs(q, 10, target="completed", value=1)  # 2 jobs/min: 30 s alone
    q.set_global_rate_limit(1, 60_000)
    q.add("first", {})
    job = q.add("second", {})
    move_to_active(q, now=ops.now_ms())  # the script INCRs the limiter
    with connected_worker(redis_url, q):
        before = ops.now_ms()
        reason = reason_of(r, q, job.id)
    assert reason is not None and reason.code == "rate_limited"
    assert reason.numbers["started_in_window"] == 1
    assert reason.numbers["max"] == 1
    assert 55_000 < reason.numbers["in_ms"] <= 60_000
    assert before + 55_000 < reason.numbers["until_ms"] <= ops.now_ms() + 60_000
    (line,) = reason.also
    assert line.code == "queued" and line.numbers["eta_ms"] == reason.numbers["in_ms"]


def test_delayed(r: redis.Redis, redis_url: str, q: Queue) -> None:
    """A delayed job: `delayed` until its delayed score's time."""
    job = q.add("job", {}, delay=90_000)
    with connected_worker(redis_url, q):
        reason = reason_of(r, q, job.id)
    assert reason is not None and codes(reason) == ["delayed"]
    assert reason.numbers["until_ms"] == job.timestamp + 90_000
    assert "Delayed until" in reason.message


def test_waiting_for_children(r: redis.Redis, redis_url: str, qname: str) -> None:
    """A parent with three children, one done: 2 of 3 pending, named."""
    flow = FlowProducer(redis_url)
    node = flow.add(
        {
            "name": "parent",
            "queue_name": qname,
            "children": [
                {"name": f"c{i}", "queue_name": qname + "c", "data": {}}
                for i in range(3)
            ],
        }
    )
    flow.close()
    children = Queue(qname + "c", redis_url)
    done_id, token, _ = claimed(move_to_active(children, now=ops.now_ms()))[0]
    move_to_finished(children, [entry(done_id, token=token)], now=ops.now_ms())
    parent = Queue(qname, redis_url)
    reason = reason_of(r, parent, node.job.id)
    assert reason is not None and reason.code == "waiting_for_children"
    assert reason.numbers["pending"] == 2 and reason.numbers["total"] == 3
    pending = {c.job.id for c in node.children} - {done_id}
    assert {(p, qn, i) for p, qn, i in reason.children} == {
        ("bull", qname + "c", i) for i in pending
    }
    children.close()
    parent.close()


def test_waiting_for_vram(r: redis.Redis, redis_url: str, q: Queue) -> None:
    """The only GPU worker serving the queue has 6 GiB uncommitted; the job's
    handler declares 10 GiB: `waiting_for_vram` with both numbers."""
    gpu_worker(r, q, budget=21 * GiB, committed=15 * GiB)
    job = demo_job(q, "10GiB")
    reason = reason_of(r, q, job.id)
    assert reason is not None and reason.code == "waiting_for_vram"
    assert reason.numbers == {
        "need_bytes": 10 * GiB,
        "most_uncommitted_bytes": 6 * GiB,
    }
    assert "10.0 GiB" in reason.message and "6.0 GiB" in reason.message


def test_vram_never_fits_names_the_gpu_that_would(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """A 30 GiB job on a queue served by a 21 GiB budget can never run; an
    H200 serving another queue would fit it, and the reason says so."""
    gpu_worker(r, q, budget=21 * GiB, committed=0)
    big_gpu(r, q, "big-queue")
    job = demo_job(q, "30GiB")
    reason = reason_of(r, q, job.id)
    assert reason is not None and reason.code == "vram_never_fits"
    assert reason.numbers["need_bytes"] == 30 * GiB
    assert reason.numbers["largest_budget_bytes"] == 21 * GiB
    fits = reason.numbers["would_fit"]
    assert [(g["gpu"], g["queues"]) for g in fits] == [
        ("NVIDIA H200", ["bull:big-queue"])
    ]
    assert "NVIDIA H200 (bull:big-queue)" in reason.message


def test_recorded_need_wins_over_the_handler(r: redis.Redis, q: Queue) -> None:
    """What a GPU worker recorded of an earlier attempt is the need used, even
    for a job no handler here knows."""
    gpu_worker(r, q, budget=21 * GiB, committed=20 * GiB)
    job = q.add("unknown-handler", {})
    r.hset(f"bullpen:job:{q.prefix}:{q.name}:{job.id}", "declared_bytes", 2 * GiB)
    reason = reason_of(r, q, job.id)
    assert reason is not None and reason.code == "waiting_for_vram"
    assert reason.numbers["need_bytes"] == 2 * GiB


def test_retry_backoff(r: redis.Redis, redis_url: str, q: Queue) -> None:
    """A real worker fails attempt 1 of 3; the job sits in its backoff:
    `retry_backoff`, attempt 2 of 3, the last error."""
    job = q.add("job", {}, attempts=3, backoff={"type": "fixed", "delay": 120_000})

    def fail(job: object) -> None:
        raise RuntimeError("GPU fell off the bus")

    worker = start_worker_thread(q.name, fail, redis_url)
    try:
        wait_until(lambda: q.get_job_state(job.id).value == "delayed", timeout=10)
    finally:
        worker.stop()
    reason = reason_of(r, q, job.id)
    assert reason is not None and reason.code == "retry_backoff"
    assert reason.numbers["attempt"] == 2 and reason.numbers["attempts"] == 3
    assert reason.numbers["last_error"] == "GPU fell off the bus"
    assert reason.message.startswith("Retry backoff: retry 1 of 2 (attempt 2 of 3) at ")
    assert 100_000 < reason.numbers["in_ms"] <= 120_000
    assert "no_worker" in codes(reason)  # the worker is gone now


def test_position_and_eta(r: redis.Redis, redis_url: str, q: Queue) -> None:
    """Ten jobs finished in the last minutes give 2 jobs/min; the fifth
    waiting job has 4 ahead and starts in about 2.5 min; a prioritized job
    counts the waiting ones and those of higher or equal priority before it."""
    run_jobs(q, 10, target="completed", value=1)
    ids = [q.add("job", {"i": i}).id for i in range(5)]
    prio = [q.add("p", {}, priority=p).id for p in (2, 1, 2, 1, 2)]
    with connected_worker(redis_url, q):
        found = explain(
            r,
            q.prefix,
            q.name,
            [
                (q.get_job(i), s)
                for i, s in [
                    (ids[0], "waiting"),
                    (ids[4], "waiting"),
                    (prio[4], "prioritized"),
                ]
            ],
        )
    first, fifth, last = (found[i] for i in (ids[0], ids[4], prio[4]))
    assert first.code == "queued" and first.numbers["ahead"] == 0
    assert first.message.startswith("Next in line")
    assert fifth.numbers["ahead"] == 4
    assert fifth.numbers["finished_per_min"] == 2.0
    assert fifth.numbers["eta_ms"] == 150_000
    assert last.numbers["ahead"] == 5 + 2 + 2  # waiting, priority 1, priority 2
    assert last.numbers["ahead_same_priority"] == 2


def test_not_waiting_gives_no_reason(r: redis.Redis, q: Queue) -> None:
    """Active jobs have no waiting reason, and nothing is read for them."""
    job_id = make_active(q)
    assert reason_of(r, q, job_id) is None


def test_odd_fields_of_another_client_never_raise(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """A job and a meta hash written oddly by another client (text where
    numbers go) still give a reason; the odd numbers read as unknown."""
    r.hset(
        q.keys.job("odd"),
        mapping={
            "name": "x",
            "data": "{not json",
            "opts": "[]",
            "priority": "high",
            "attemptsMade": "many",
            "timestamp": "soon",
        },
    )
    r.lpush(q.keys.wait, "odd")
    r.hset(q.keys.meta, mapping={"concurrency": "lots", "max": "1e999"})
    with connected_worker(redis_url, q):
        reason = reason_of(r, q, "odd")
    assert reason is not None and codes(reason) == ["queued"]
    assert reason.numbers["ahead"] == 0


def test_a_key_of_the_wrong_type_reads_as_unknown(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """A limiter key that is not a string makes Redis refuse the read: the
    reason is `unknown`, saying why, instead of an error page."""
    job = q.add("job", {})
    r.hset(q.keys.limiter, "x", "1")
    reason = reason_of(r, q, job.id)
    assert reason is not None and reason.code == "unknown"
    assert "WRONGTYPE" in reason.message


def test_reads_are_bounded_on_a_queue_of_10k(
    r: redis.Redis, redis_url: str, q: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of 50 rows of a queue of 10,050 waiting jobs costs the same
    commands as on a queue of 60, in four round trips (facts, CLIENT LIST,
    the fleet's index and records); the job furthest back, past the scan
    from the front, is found by the bounded scan from the back: exactly
    10,049 ahead, without a walk of the whole list."""
    gpu_worker(r, q, budget=21 * GiB, committed=0)
    conn = sync_client(redis_url)  # decoding as the pages' client does

    def commands_for_page() -> tuple[int, int, dict[str, Any]]:
        page = q.get_jobs(["waiting"], 0, 49, asc=False)  # the newest: furthest back
        rows = [(job, "waiting") for job in page]
        explain(conn, q.prefix, q.name, rows)  # connections made, as on a warm page
        r.config_resetstat()
        taken = round_trips(conn, monkeypatch)
        with connected_worker(redis_url, q):
            found = explain(conn, q.prefix, q.name, rows)
        stats = r.info("commandstats")
        monkeypatch.undo()
        calls = sum(v["calls"] for k, v in stats.items() if k != "cmdstat_config")
        assert len(found) == 50
        return calls, len(taken), found[newest[-1].id].numbers

    newest = q.add_bulk([{"name": "job", "data": {"i": i}} for i in range(60)])
    small, trips_small, back = commands_for_page()
    assert back["ahead"] == 59
    newest = q.add_bulk([{"name": "job", "data": {"i": i}} for i in range(9_990)])
    assert q.get_counts("waiting")["waiting"] == 10_050
    large, trips_large, furthest = commands_for_page()
    assert large == small
    assert trips_small == trips_large == 4
    assert furthest["ahead"] == 10_049 and "ahead_at_least" not in furthest


def test_a_node_workers_manual_rate_limit_and_its_own_limiter(
    r: redis.Redis, redis_url: str, q: Queue
) -> None:
    """Node's `worker.rateLimit(ms)` (the limiter set to MAX_SAFE_INTEGER)
    is `rate_limited` with no count; a worker's own limiter option leaves a
    count whose limit only that worker knows, which names no reason."""
    job = q.add("job", {})
    r.set(q.keys.limiter, 3, px=30_000)  # a worker's own limiter: max unknown
    with connected_worker(redis_url, q):
        reason = reason_of(r, q, job.id)
        assert reason is not None and codes(reason) == ["queued"]
        r.set(q.keys.limiter, 2**53 - 1, px=30_000)
        reason = reason_of(r, q, job.id)
        q.remove_rate_limit_key()
        q.rate_limit(20_000)  # Bullpen's own: the same limiter
        ours = reason_of(r, q, job.id)
    assert reason is not None and reason.code == "rate_limited"
    assert reason.numbers["started_in_window"] is None
    assert 25_000 < reason.numbers["in_ms"] <= 30_000
    assert reason.message.startswith("Rate-limited by hand (a manual rate limit) until")
    assert ours is not None and ours.code == "rate_limited"
    assert 15_000 < ours.numbers["in_ms"] <= 20_000


def test_a_failed_gpu_worker_serves_nobody(r: redis.Redis, q: Queue) -> None:
    """A GPU worker record still fresh but failed (or draining) is no live
    worker: with nothing else connected the job has `no_worker`."""
    gpu_worker(r, q, budget=21 * GiB, committed=0)
    job = q.add("job", {})
    reason = reason_of(r, q, job.id)
    assert reason is not None and codes(reason) == ["queued"]
    for state in ("failed", "draining"):
        record = json.loads(r.get("bullpen:worker:w1") or "{}")
        record["state"] = state
        r.set("bullpen:worker:w1", json.dumps(record), keepttl=True)
        reason = reason_of(r, q, job.id)
        assert reason is not None and reason.code == "no_worker", state
